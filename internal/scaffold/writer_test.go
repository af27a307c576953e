package scaffold

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriterRefusesToOverwrite(t *testing.T) {
	w := &Writer{Root: t.TempDir()}
	if err := w.WriteFile("a/b.txt", []byte("one")); err != nil {
		t.Fatal(err)
	}
	err := w.WriteFile("a/b.txt", []byte("two"))
	if err == nil || !strings.Contains(err.Error(), "a/b.txt exists already") || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("second write: error = %v", err)
	}
	w.Force = true
	if err := w.WriteFile("a/b.txt", []byte("two")); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(w.Root, "a", "b.txt")); string(got) != "two" {
		t.Errorf("content = %q", got)
	}
	if got := strings.Join(w.Written(), ","); got != "a/b.txt,a/b.txt" {
		t.Errorf("Written = %s", got)
	}
}

func TestWriterScriptsAreExecutable(t *testing.T) {
	w := &Writer{Root: t.TempDir()}
	if err := w.WriteFile("run.sh", []byte("#!/bin/sh\n")); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(filepath.Join(w.Root, "run.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm()&0o100 == 0 {
		t.Errorf("mode = %v, want executable", info.Mode())
	}
}

func TestWriterTemplate(t *testing.T) {
	w := &Writer{Root: t.TempDir()}
	data := map[string]string{"Kind": "Frigate"}
	if err := w.Template("x.mk", "[[ lower .Kind ]]: {{ not a template }}\n", data); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(w.Root, "x.mk")); string(got) != "frigate: {{ not a template }}\n" {
		t.Errorf("content = %q", got)
	}
	if err := w.Template("y", "[[ .Missing ]]", data); err == nil {
		t.Error("a missing key rendered")
	}
}

func TestWriterInsert(t *testing.T) {
	w := &Writer{Root: t.TempDir()}
	main := "func main() {\n\t// +polyop:scaffold:controllers\n}\n"
	if err := w.WriteFile("main.go", []byte(main)); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"Frigate", "Harbor"} {
		if err := w.Insert("main.go", "+polyop:scaffold:controllers", "register"+kind+"()\n"); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := os.ReadFile(filepath.Join(w.Root, "main.go"))
	want := "func main() {\n\tregisterFrigate()\n\tregisterHarbor()\n\t// +polyop:scaffold:controllers\n}\n"
	if string(got) != want {
		t.Errorf("content = %q, want %q", got, want)
	}
	err := w.Insert("main.go", "+polyop:scaffold:webhooks", "x")
	if err == nil || !strings.Contains(err.Error(), "+polyop:scaffold:webhooks") {
		t.Errorf("missing marker: error = %v", err)
	}
}

func TestCheckEmpty(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{".git", "go.mod"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := CheckEmpty(dir); err != nil {
		t.Errorf("a folder with .git and go.mod: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.py"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckEmpty(dir); !errors.Is(err, ErrNotEmpty) || !strings.Contains(err.Error(), "main.py") {
		t.Errorf("a folder with main.py: %v", err)
	}
	if err := CheckEmpty(filepath.Join(dir, "missing")); err != nil {
		t.Errorf("a missing folder: %v", err)
	}
}
