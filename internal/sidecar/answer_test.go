package sidecar

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/polyop/polyop/internal/fakesidecar"
	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// answering is a sidecar that answers every Reconcile with resp.
func answering(resp *polyopv1alpha1.ReconcileResponse) *fakesidecar.Fake {
	return &fakesidecar.Fake{OnReconcile: fakesidecar.Answer(func(*polyopv1alpha1.ReconcileRequest) *polyopv1alpha1.ReconcileResponse { return resp })}
}

func reconcileWith(t *testing.T, resp *polyopv1alpha1.ReconcileResponse, opts Options) (*polyopv1alpha1.ReconcileResponse, error) {
	t.Helper()
	addr, _ := fakesidecar.Serve(t, answering(resp))
	opts.Address = addr
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.Reconcile(context.Background(), &polyopv1alpha1.ReconcileRequest{Controller: "c"})
}

func TestReconcileReadsEveryFieldOfTheAnswer(t *testing.T) {
	t.Parallel()
	want := &polyopv1alpha1.ReconcileResponse{
		RequeueAfter:     durationpb.New(90_000_000_000),
		Error:            &polyopv1alpha1.Failure{Message: "boom", Terminal: true, RetryAfter: durationpb.New(2_000_000_000)},
		Status:           []byte(`{"phase":"Ready"}`),
		Events:           []*polyopv1alpha1.Event{{Type: polyopv1alpha1.EventType_EVENT_TYPE_WARNING, Reason: "R", Message: "m"}, {Reason: "S"}},
		DesiredChildren:  [][]byte{[]byte(`{"kind":"ConfigMap"}`), []byte(`{"kind":"Secret"}`)},
		ChildrenComplete: true,
	}
	got, err := reconcileWith(t, want, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) {
		t.Errorf("Reconcile = %v, want %v", got, want)
	}
}

func TestReconcileSkipsAStatusOrChildOverTheLimitWithoutReadingIt(t *testing.T) {
	t.Parallel()
	big := append(append([]byte(`{"x":"`), bytes.Repeat([]byte("a"), 2000)...), `"}`...)
	resp := &polyopv1alpha1.ReconcileResponse{
		Status:          big,
		Events:          []*polyopv1alpha1.Event{{Reason: "R"}},
		DesiredChildren: [][]byte{[]byte(`{"kind":"ConfigMap"}`), big},
	}
	got, err := reconcileWith(t, resp, Options{MaxObjectSize: 1000})
	var tooLarge *TooLargeError
	if !errors.As(err, &tooLarge) {
		t.Fatalf("Reconcile error = %v, want a TooLargeError", err)
	}
	for _, want := range []string{"status is 2008 bytes, over the limit of 1000 bytes", "desired_children[1] is 2008 bytes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Reconcile error = %q, want it to contain %q", err, want)
		}
	}
	if got.GetStatus() != nil || len(got.GetDesiredChildren()) != 2 || got.GetDesiredChildren()[1] != nil || len(got.GetEvents()) != 1 {
		t.Errorf("the answer is %v, want the oversized parts left out and the rest read", got)
	}
	if err := CheckSizes(resp, 1000); err == nil || err.Error() != errorsJoinedText(t, resp) {
		t.Errorf("CheckSizes = %v, want the errors Reconcile returned", err)
	}
}

func errorsJoinedText(t *testing.T, resp *polyopv1alpha1.ReconcileResponse) string {
	t.Helper()
	return (&TooLargeError{Field: "status", Size: len(resp.Status), Limit: 1000}).Error() + "\n" +
		(&TooLargeError{Field: "desired_children[1]", Size: len(resp.DesiredChildren[1]), Limit: 1000}).Error()
}

// TestAnOversizedStatusIsNotCopied gives the answer codec a message with a
// 32 MiB status, in the 16 KiB buffers gRPC receives it in: the codec skips
// the status without copying it, where the default codec copies the message
// and then the status out of it. Through a real call, the client reports the
// status as too large.
func TestAnOversizedStatusIsNotCopied(t *testing.T) {
	const size = 32 << 20
	status := append(append([]byte(`{"x":"`), bytes.Repeat([]byte("a"), size)...), `"}`...)
	raw, err := proto.Marshal(&polyopv1alpha1.ReconcileResponse{Status: status, ChildrenComplete: true})
	if err != nil {
		t.Fatal(err)
	}
	var data mem.BufferSlice
	for off := 0; off < len(raw); off += 16 << 10 {
		data = append(data, mem.SliceBuffer(raw[off:min(off+16<<10, len(raw))]))
	}
	measure := func(decode func() error) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		if err := decode(); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	answer := &reconcileAnswer{resp: &polyopv1alpha1.ReconcileResponse{}, limit: DefaultMaxObjectSize}
	bounded := measure(func() error { return answerCodec{}.Unmarshal(data, answer) })
	plain := measure(func() error { return protoCodec.Unmarshal(data, &polyopv1alpha1.ReconcileResponse{}) })
	t.Logf("allocated for a %d MiB status: %d KiB bounded, %d MiB with the default codec", size>>20, bounded>>10, plain>>20)
	if len(answer.tooLarge) != 1 || answer.resp.GetStatus() != nil || !answer.resp.GetChildrenComplete() {
		t.Errorf("decoded %v with %v too large, want children_complete and the status alone too large", answer.resp, answer.tooLarge)
	}
	if bounded > 1<<20 {
		t.Errorf("the answer codec allocated %d bytes for a message with a %d-byte status it skips, want well under 1 MiB", bounded, size)
	}
	if plain < size {
		t.Errorf("the default codec allocated %d bytes, less than the %d-byte status it copies: the comparison measures nothing", plain, size)
	}

	addr, _ := fakesidecar.Serve(t, answering(&polyopv1alpha1.ReconcileResponse{Status: status}))
	c, err := New(Options{Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Reconcile(context.Background(), &polyopv1alpha1.ReconcileRequest{})
	if tooLarge := (*TooLargeError)(nil); !errors.As(err, &tooLarge) || tooLarge.Field != "status" || tooLarge.Size != len(status) {
		t.Errorf("Reconcile of an answer with a %d-byte status: %v, want a TooLargeError for the status", len(status), err)
	}
}

// FuzzAnswerCodec checks that the bounded decoding of a ReconcileResponse
// reads every message the proto package reads, to the same result, and
// refuses what it refuses.
func FuzzAnswerCodec(f *testing.F) {
	for _, resp := range []*polyopv1alpha1.ReconcileResponse{
		{},
		{Status: []byte(`{"a":1}`), DesiredChildren: [][]byte{[]byte(`{}`), nil}, ChildrenComplete: true},
		{RequeueAfter: durationpb.New(5), Error: &polyopv1alpha1.Failure{Message: "m", RetryAfter: durationpb.New(7)}, Events: []*polyopv1alpha1.Event{{Reason: "R"}}},
	} {
		b, err := proto.Marshal(resp)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x22, 0x05, 'a'})        // a status longer than the message
	f.Add([]byte{0x22, 0xff, 0xff, 0xff}) // a truncated length
	f.Fuzz(func(t *testing.T, data []byte) {
		want := &polyopv1alpha1.ReconcileResponse{}
		wantErr := proto.Unmarshal(data, want)
		a := &reconcileAnswer{resp: &polyopv1alpha1.ReconcileResponse{}}
		err := answerCodec{}.Unmarshal(mem.BufferSlice{mem.SliceBuffer(bytes.Clone(data))}, a)
		switch {
		case wantErr == nil && err != nil:
			t.Fatalf("proto reads %x, the bounded codec does not: %v", data, err)
		case wantErr != nil && err == nil:
			t.Fatalf("proto refuses %x (%v), the bounded codec reads it as %v", data, wantErr, a.resp)
		case err == nil && !proto.Equal(a.resp, want):
			t.Fatalf("%x: the bounded codec reads %v, proto %v", data, a.resp, want)
		}
	})
}
