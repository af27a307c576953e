package gosdk_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// hostModule is the path of the host's module, which a program that uses the
// SDK must not depend on.
const hostModule = "github.com/polyop/polyop"

// TestAProgramDependsOnTheSDKAlone builds, outside the repository, a program
// of its own module that requires the SDK's module (replaced by this
// directory) and uses its packages, runs it, and checks that its build list
// holds the SDK's module and not the host's.
func TestAProgramDependsOnTheSDKAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program with the go command")
	}
	t.Parallel()
	sdk, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if rel, err := filepath.Rel(filepath.Dir(filepath.Dir(sdk)), dir); err == nil && !strings.HasPrefix(rel, "..") {
		t.Fatalf("the temporary directory %s is inside the repository", dir)
	}
	goMod := "module example.com/user\n\ngo 1.26.0\n\n" +
		"require github.com/polyop/polyop/sdk/go v0.0.0-00010101000000-000000000000\n\n" +
		"replace github.com/polyop/polyop/sdk/go => " + sdk + "\n"
	mainGo := `package main

import (
	"fmt"
	"os"

	"github.com/polyop/polyop/sdk/go/client"
	"github.com/polyop/polyop/sdk/go/conditions"
	"github.com/polyop/polyop/sdk/go/sidecar"
)

func main() {
	srv, err := sidecar.New(sidecar.Options{Name: "user"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_ = srv
	_ = client.Options{}
	_ = conditions.Set
	fmt.Println(sidecar.SDKName, sidecar.DefaultAddress)
}
`
	// The SDK's go.sum covers the program's build list: the program
	// requires nothing else.
	goSum, err := os.ReadFile("go.sum")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"go.mod": []byte(goMod), "go.sum": goSum, "main.go": []byte(mainGo)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	gocmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		// No workspace: the program is built as a user builds it. -mod=mod
		// lets go build complete go.mod from the SDK's requirements; GOPROXY
		// is the environment's.
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return string(out)
	}
	program := filepath.Join(dir, "user")
	gocmd("build", "-o", program, ".")
	out, err := exec.Command(program).Output()
	if err != nil {
		t.Fatalf("running the program: %v", err)
	}
	if got, want := strings.TrimSpace(string(out)), "polyop-go unix:///var/run/polyop/sidecar.sock"; got != want {
		t.Errorf("the program printed %q, want %q", got, want)
	}

	var sdkFound bool
	sc := bufio.NewScanner(strings.NewReader(gocmd("list", "-m", "all")))
	for sc.Scan() {
		module, _, _ := strings.Cut(sc.Text(), " ")
		switch module {
		case hostModule:
			t.Errorf("the program's build list holds the host's module: %s", sc.Text())
		case hostModule + "/sdk/go":
			sdkFound = true
		}
	}
	if !sdkFound {
		t.Error("the program's build list does not hold the SDK's module")
	}
}
