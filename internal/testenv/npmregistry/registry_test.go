package npmregistry_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/polyop/polyop/internal/testenv/npmregistry"
)

// writeTarball writes a package tarball as npm pack lays it out: files
// under package/, the package.json made from manifest.
func writeTarball(t *testing.T, dir string, manifest map[string]any, files map[string]string) string {
	t.Helper()
	pkg, err := json.Marshal(manifest)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	all := map[string]string{"package.json": string(pkg)}
	for name, content := range files {
		all[name] = content
	}
	for _, name := range slices.Sorted(maps.Keys(all)) {
		content := all[name]
		if err := tw.WriteHeader(&tar.Header{Name: "package/" + name, Mode: 0o755, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, strings.NewReplacer("@", "", "/", "-").Replace(manifest["name"].(string))+"-"+manifest["version"].(string)+".tgz")
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

type packument struct {
	Name     string
	DistTags map[string]string `json:"dist-tags"`
	Versions map[string]struct {
		Name, Version string
		Bin           map[string]string
		OS            []string
		Dist          struct{ Tarball, Shasum, Integrity string }
	}
}

func TestThePackumentListsEveryVersionWithItsTarballsHashes(t *testing.T) {
	dir := t.TempDir()
	var tarballs []string
	for _, v := range []string{"1.9.0", "1.10.0", "1.10.0-rc.1"} {
		tarballs = append(tarballs, writeTarball(t, dir,
			map[string]any{"name": "@acme/tool", "version": v, "bin": map[string]string{"tool": "bin/tool.js"}, "os": []string{"linux"}},
			map[string]string{"bin/tool.js": "#!/usr/bin/env node\nconsole.log('" + v + "')\n"}))
	}
	reg, err := npmregistry.Start(tarballs...)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()

	if got, want := reg.Packages(), []string{"@acme/tool@1.10.0", "@acme/tool@1.10.0-rc.1", "@acme/tool@1.9.0"}; !slices.Equal(got, want) {
		t.Errorf("Packages() = %v, want %v", got, want)
	}
	// npm escapes a scoped name's slash; other clients do not.
	var docs [][]byte
	for _, p := range []string{"@acme%2ftool", "@acme%2Ftool", "@acme/tool"} {
		status, body := get(t, reg.URL()+p)
		if status != http.StatusOK {
			t.Fatalf("GET /%s: %d %s", p, status, body)
		}
		docs = append(docs, body)
	}
	if !bytes.Equal(docs[0], docs[1]) || !bytes.Equal(docs[0], docs[2]) {
		t.Errorf("the escaped and plain names answer differently:\n%s\n%s\n%s", docs[0], docs[1], docs[2])
	}
	var doc packument
	if err := json.Unmarshal(docs[0], &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Name != "@acme/tool" || doc.DistTags["latest"] != "1.10.0" {
		t.Errorf("name %q, latest %q; want @acme/tool, 1.10.0 (the highest release, by semver)", doc.Name, doc.DistTags["latest"])
	}
	for v, m := range doc.Versions {
		if m.Name != "@acme/tool" || m.Version != v || m.Bin["tool"] != "bin/tool.js" || !slices.Equal(m.OS, []string{"linux"}) {
			t.Errorf("version %s: the package.json of the tarball is not passed on: %+v", v, m)
		}
		if want := reg.TarballURL("@acme/tool", v); m.Dist.Tarball != want || !strings.HasSuffix(want, "/@acme/tool/-/tool-"+v+".tgz") {
			t.Errorf("version %s: dist.tarball %s, want %s", v, m.Dist.Tarball, want)
		}
		status, tgz := get(t, m.Dist.Tarball)
		if status != http.StatusOK {
			t.Fatalf("GET %s: %d", m.Dist.Tarball, status)
		}
		onDisk, err := os.ReadFile(filepath.Join(dir, "acme-tool-"+v+".tgz"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(tgz, onDisk) {
			t.Errorf("version %s: the tarball served is not the file", v)
		}
		s1, s512 := sha1.Sum(tgz), sha512.Sum512(tgz)
		if m.Dist.Shasum != hex.EncodeToString(s1[:]) || m.Dist.Integrity != "sha512-"+base64.StdEncoding.EncodeToString(s512[:]) {
			t.Errorf("version %s: dist %+v does not hash the tarball", v, m.Dist)
		}
	}
	if got := reg.Downloads(); len(got) != 3 {
		t.Errorf("Downloads() = %v, want the three tarballs", got)
	}
}

func TestWhatItDoesNotHaveIsNotFound(t *testing.T) {
	reg, err := npmregistry.Start(writeTarball(t, t.TempDir(), map[string]any{"name": "left-pad", "version": "1.0.0"}, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	for _, p := range []string{"right-pad", "@acme%2fleft-pad", "left-pad/-/left-pad-2.0.0.tgz", "left-pad/-/right-pad-1.0.0.tgz"} {
		if status, body := get(t, reg.URL()+p); status != http.StatusNotFound || !strings.Contains(string(body), `"error"`) {
			t.Errorf("GET /%s: %d %s, want 404 with an error", p, status, body)
		}
	}
	req, err := http.NewRequest(http.MethodPut, reg.URL()+"left-pad", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("PUT (npm publish): %d, want 405", resp.StatusCode)
	}
	if got := reg.Downloads(); len(got) != 0 {
		t.Errorf("Downloads() = %v after no tarball was served", got)
	}
}

func TestAddRefusesWhatIsNotAPackageTarball(t *testing.T) {
	dir := t.TempDir()
	notGzip := filepath.Join(dir, "plain.tgz")
	if err := os.WriteFile(notGzip, []byte("not a tarball"), 0o644); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		notGzip: "not a gzipped tarball",
		writeTarball(t, dir, map[string]any{"name": "nameless-version", "version": "one"}, nil): "no version such as 1.2.3",
		writeTarball(t, dir, map[string]any{"name": "", "version": "1.0.0"}, nil):               "no name",
		filepath.Join(dir, "missing.tgz"):                                                       "no such file",
	} {
		if _, err := npmregistry.Start(file); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Start(%s): %v, want an error saying %q", filepath.Base(file), err, want)
		}
	}
	if _, err := npmregistry.StartDir(dir + "/empty"); err == nil || !strings.Contains(err.Error(), "no .tgz files") {
		t.Errorf("StartDir of a folder without tarballs: %v", err)
	}
}

// npm itself installs from the registry: a package whose optional
// dependencies are one for this platform, one for another (its os field)
// and one the registry never had, as @polyop/cli's are when a release
// builds some platforms only. npm installs the first and skips the others.
func TestNPMInstallsFromItWithOptionalDependencies(t *testing.T) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("no npm on PATH")
	}
	other := "aix"
	if runtime.GOOS == "aix" {
		other = "sunos"
	}
	dir := t.TempDir()
	reg, err := npmregistry.Start(
		writeTarball(t, dir, map[string]any{"name": "@acme/tool", "version": "1.0.0",
			"optionalDependencies": map[string]string{"@acme/tool-here": "1.0.0", "@acme/tool-elsewhere": "1.0.0", "@acme/tool-never": "1.0.0"}}, nil),
		writeTarball(t, dir, map[string]any{"name": "@acme/tool-here", "version": "1.0.0"}, map[string]string{"bin/tool": "#!/bin/sh\n"}),
		writeTarball(t, dir, map[string]any{"name": "@acme/tool-elsewhere", "version": "1.0.0", "os": []string{other}}, nil),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()

	// The three ways to point npm's @acme scope at the registry.
	install := func(t *testing.T, how string) string {
		t.Helper()
		project := t.TempDir()
		if err := os.WriteFile(filepath.Join(project, "package.json"), []byte(`{"name": "project", "private": true}`), 0o644); err != nil {
			t.Fatal(err)
		}
		args := []string{"install", "--no-audit", "--no-fund", "--cache", filepath.Join(t.TempDir(), "cache"), "@acme/tool@1.0.0"}
		cmd := exec.Command(npm)
		cmd.Dir = project
		cmd.Env = os.Environ()
		switch how {
		case "flag":
			args = append(args, reg.ScopeFlag("@acme"))
		case "env":
			cmd.Env = append(cmd.Env, reg.ScopeEnv("@acme"))
		case "npmrc":
			if err := os.WriteFile(filepath.Join(project, ".npmrc"), []byte(reg.ScopeConfig("@acme")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cmd.Args = append(cmd.Args, args...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm install (scope by %s): %v\n%s", how, err, out)
		}
		return project
	}
	for _, how := range []string{"env", "npmrc"} {
		t.Run("the scope set by "+how, func(t *testing.T) {
			if _, err := os.Stat(filepath.Join(install(t, how), "node_modules", "@acme", "tool-here", "bin", "tool")); err != nil {
				t.Error(err)
			}
		})
	}
	before := len(reg.Downloads())
	project := install(t, "flag")
	for pkg, want := range map[string]bool{"tool": true, "tool-here": true, "tool-elsewhere": false, "tool-never": false} {
		_, err := os.Stat(filepath.Join(project, "node_modules", "@acme", pkg, "package.json"))
		if got := err == nil; got != want {
			t.Errorf("node_modules/@acme/%s installed: %v, want %v", pkg, got, want)
		}
	}
	info, err := os.Stat(filepath.Join(project, "node_modules", "@acme", "tool-here", "bin", "tool"))
	if err != nil || info.Mode().Perm()&0o111 == 0 {
		t.Errorf("bin/tool of @acme/tool-here is not installed executable: %v", err)
	}
	if got, want := reg.Downloads()[before:], []string{"@acme/tool-here@1.0.0", "@acme/tool@1.0.0"}; !slices.Equal(slices.Sorted(slices.Values(got)), want) {
		t.Errorf("npm downloaded %v, want %v", got, want)
	}
}
