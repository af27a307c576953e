// Package npmregistry serves npm packages from their tarballs on loopback,
// as the npm registry serves them to npm install, for tests that install
// what `npm pack` made (make release-npm) the way a user installs it from
// npmjs.com, without publishing it.
//
// It answers what npm install asks: a package's document (its packument) at
// /<name>, a scoped name's slash escaped (/@polyop%2fcli) or not
// (/@polyop/cli), listing every version added with the package.json of its
// tarball and a dist of the tarball's URL, SHA-1 (shasum) and SHA-512
// (integrity, as a subresource integrity string); and the tarballs, at
// /<name>/-/<unscoped name>-<version>.tgz. A package it has no version of
// answers 404, as the registry does for one never published, which npm
// takes as a failed optional dependency and skips. It takes no publish and
// keeps no users.
//
//	reg, err := npmregistry.StartDir(filepath.Join(distDir, "npm")) // or Start(tarballs...)
//	...
//	defer reg.Close()
//	// Only the @polyop scope from here; every other package from npm's cache or registry.
//	cmd := exec.Command("npm", "install", "--save-dev", "@polyop/cli", reg.ScopeFlag("@polyop"))
package npmregistry

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/semver"
)

// Registry is an npm registry serving the packages of tarballs over HTTP on
// 127.0.0.1. Its methods are safe to call while it serves.
type Registry struct {
	server *httptest.Server

	mu        sync.Mutex
	packages  map[string]map[string]*version // by name, then version
	downloads []string                       // name@version of each tarball served
}

// version is one version of a package: its tarball and the package.json in
// it.
type version struct {
	name, version string
	manifest      map[string]any
	tarball       []byte
	shasum        string // hex SHA-1
	integrity     string // sha512-<base64>
	added         time.Time
}

// Start serves the packages of tarballs (`npm pack` output, package/… inside)
// until Close.
func Start(tarballs ...string) (*Registry, error) {
	r := &Registry{packages: map[string]map[string]*version{}}
	for _, t := range tarballs {
		if err := r.Add(t); err != nil {
			return nil, err
		}
	}
	r.server = httptest.NewServer(r)
	return r, nil
}

// StartDir serves the packages of every .tgz file in dir, such as the
// DIST_DIR/npm of make release-npm.
func StartDir(dir string) (*Registry, error) {
	tarballs, err := filepath.Glob(filepath.Join(dir, "*.tgz"))
	if err != nil {
		return nil, err
	}
	if len(tarballs) == 0 {
		return nil, fmt.Errorf("no .tgz files in %s to serve", dir)
	}
	return Start(tarballs...)
}

// Add serves one more package version, the tarball's. A tarball of a name
// and version already served replaces it.
func (r *Registry) Add(tarball string) error {
	data, err := os.ReadFile(tarball)
	if err != nil {
		return err
	}
	manifest, err := packageJSON(data)
	if err != nil {
		return fmt.Errorf("%s: %w", tarball, err)
	}
	name, _ := manifest["name"].(string)
	v, _ := manifest["version"].(string)
	if name == "" || !semver.IsValid("v"+v) {
		return fmt.Errorf("%s: its package.json has no name or no version such as 1.2.3 (name %q, version %q)", tarball, name, v)
	}
	// npm checks dist.integrity (SHA-512); dist.shasum (SHA-1) is what
	// older clients check, and what the registry still lists.
	sha1sum := sha1.Sum(data)
	sha512sum := sha512.Sum512(data)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.packages[name] == nil {
		r.packages[name] = map[string]*version{}
	}
	r.packages[name][v] = &version{
		name: name, version: v, manifest: manifest, tarball: data,
		shasum:    hex.EncodeToString(sha1sum[:]),
		integrity: "sha512-" + base64.StdEncoding.EncodeToString(sha512sum[:]),
		added:     time.Now().UTC(),
	}
	return nil
}

// URL is the registry's address, http://127.0.0.1:<port>/: what npm's
// registry setting, or a scope's (@scope:registry), takes.
func (r *Registry) URL() string { return r.server.URL + "/" }

// ScopeFlag is the npm command-line flag that sends the packages of scope
// (@polyop) to this registry, and no other: --@polyop:registry=<URL>.
func (r *Registry) ScopeFlag(scope string) string {
	return "--" + r.ScopeConfig(scope)
}

// ScopeConfig is the line of an .npmrc (a project's, or the one
// NPM_CONFIG_USERCONFIG names) that sends the packages of scope to this
// registry: @polyop:registry=<URL>.
func (r *Registry) ScopeConfig(scope string) string {
	return scope + ":registry=" + r.URL()
}

// ScopeEnv is the environment variable, NAME=value, that sends the packages
// of scope to this registry in every npm command that inherits it, such as
// those a Makefile runs: npm_config_@polyop:registry=<URL>.
func (r *Registry) ScopeEnv(scope string) string {
	return "npm_config_" + r.ScopeConfig(scope)
}

// Packages lists the versions served, as name@version, sorted.
func (r *Registry) Packages() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for name, versions := range r.packages {
		for v := range versions {
			out = append(out, name+"@"+v)
		}
	}
	slices.Sort(out)
	return out
}

// Downloads lists the tarballs served so far, as name@version, in the order
// they were: what npm installed from here (a cached tarball is not fetched
// again).
func (r *Registry) Downloads() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.downloads)
}

// TarballURL is where the registry serves a version's tarball, as its
// packument's dist.tarball says.
func (r *Registry) TarballURL(name, version string) string {
	return r.server.URL + tarballPath(name, version)
}

// Close stops serving, once the requests under way are answered.
func (r *Registry) Close() { r.server.Close() }

// ServeHTTP answers npm's requests: packuments and tarballs, GET and HEAD.
func (r *Registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "this registry serves packages and takes no "+req.Method)
		return
	}
	p, err := url.PathUnescape(req.URL.EscapedPath())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	p = strings.TrimPrefix(p, "/")
	if name, file, ok := strings.Cut(p, "/-/"); ok {
		r.serveTarball(w, req, name, file)
		return
	}
	r.servePackument(w, p)
}

// servePackument writes the document of package name: every version with
// its package.json and dist, and the dist-tag latest at the highest.
func (r *Registry) servePackument(w http.ResponseWriter, name string) {
	r.mu.Lock()
	versions := r.packages[name]
	doc := map[string]any{"_id": name, "name": name}
	all := map[string]any{}
	times := map[string]string{}
	var latest string
	var modified time.Time
	for v, pv := range versions {
		m := make(map[string]any, len(pv.manifest)+2)
		for k, val := range pv.manifest {
			m[k] = val
		}
		m["_id"] = name + "@" + v
		m["dist"] = map[string]any{
			"tarball":   r.TarballURL(name, v),
			"shasum":    pv.shasum,
			"integrity": pv.integrity,
		}
		all[v] = m
		times[v] = pv.added.Format(time.RFC3339Nano)
		if latest == "" || semver.Compare("v"+v, "v"+latest) > 0 {
			latest = v
		}
		if pv.added.After(modified) {
			modified = pv.added
		}
	}
	r.mu.Unlock()
	if len(all) == 0 {
		writeError(w, http.StatusNotFound, "Not found")
		return
	}
	times["modified"] = modified.Format(time.RFC3339Nano)
	doc["versions"] = all
	doc["dist-tags"] = map[string]string{"latest": latest}
	doc["time"] = times
	writeJSON(w, http.StatusOK, doc)
}

// serveTarball writes the tarball file of package name, which names its
// version: <unscoped name>-<version>.tgz.
func (r *Registry) serveTarball(w http.ResponseWriter, req *http.Request, name, file string) {
	r.mu.Lock()
	var found *version
	for v, pv := range r.packages[name] {
		if path.Base(tarballPath(name, v)) == file {
			found = pv
		}
	}
	if found != nil && req.Method == http.MethodGet {
		r.downloads = append(r.downloads, found.name+"@"+found.version)
	}
	r.mu.Unlock()
	if found == nil {
		writeError(w, http.StatusNotFound, "Not found")
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, req, file, found.added, bytes.NewReader(found.tarball))
}

// tarballPath is the path of a version's tarball on the registry, as
// registry.npmjs.org names it: /@scope/name/-/name-1.2.3.tgz.
func tarballPath(name, version string) string {
	return "/" + name + "/-/" + path.Base(name) + "-" + version + ".tgz"
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

func writeError(w http.ResponseWriter, status int, message string) {
	writeJSON(w, status, map[string]string{"error": message})
}

// packageJSON reads the package.json at the top of a package tarball's one
// folder (package/ for npm pack's).
func packageJSON(tgz []byte) (map[string]any, error) {
	gz, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		return nil, fmt.Errorf("not a gzipped tarball: %w", err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, errors.New("no package.json in its top folder")
		}
		if err != nil {
			return nil, fmt.Errorf("reading the tarball: %w", err)
		}
		dir, file, ok := strings.Cut(strings.TrimPrefix(h.Name, "./"), "/")
		if !ok || dir == "" || file != "package.json" || h.Typeflag != tar.TypeReg {
			continue
		}
		var manifest map[string]any
		if err := json.NewDecoder(tr).Decode(&manifest); err != nil {
			return nil, fmt.Errorf("its %s: %w", h.Name, err)
		}
		return manifest, nil
	}
}
