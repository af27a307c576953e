package otlptest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/polyop/polyop/internal/otlptest"
	"github.com/polyop/polyop/sdk/go/tracing"
)

func TestTheReceiverGetsTheSpansOfAProviderConfiguredByItsEnv(t *testing.T) {
	r := otlptest.Start(t)
	for _, kv := range r.Env("otlptest") {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	ctx := context.Background()
	tp, err := tracing.NewProvider(ctx, tracing.Options{})
	if err != nil || tp == nil {
		t.Fatalf("NewProvider = %v, %v", tp, err)
	}
	tracer := tp.Tracer("test")
	ctx, parent := tracer.Start(ctx, "parent")
	_, child := tracer.Start(ctx, "child")
	child.SetAttributes(tracing.Name.String("x"))
	child.End()
	parent.End()
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	spans := r.WaitForTrace(t, time.Minute, func(s otlptest.Span) bool { return s.Name == "parent" }, func(s []otlptest.Span) bool { return len(s) == 2 })
	tree := otlptest.Tree(spans)
	t.Log("\n" + tree)
	if !strings.HasPrefix(tree, "parent [otlptest, internal]") || !strings.Contains(tree, "\n  child [otlptest, internal] polyop.name=x") {
		t.Errorf("tree:\n%s\nwant child under parent, from service otlptest", tree)
	}
}
