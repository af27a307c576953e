package deploy

import (
	"bufio"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// dockerfile is a parsed Dockerfile: its instructions, stage by stage.
type dockerfile struct {
	args   map[string]string // ARG defaults before the first FROM
	stages []*stage
}

type stage struct {
	from, name   string
	instructions [][2]string // keyword (upper case), rest of the line
}

func parseDockerfile(t *testing.T, file string) *dockerfile {
	t.Helper()
	f, err := os.Open(repo(file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := &dockerfile{args: map[string]string{}}
	var line string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(text, "#") || (text == "" && line == "") {
			continue
		}
		if cont, ok := strings.CutSuffix(text, "\\"); ok {
			line += cont + " "
			continue
		}
		line += text
		keyword, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		keyword, rest = strings.ToUpper(keyword), strings.TrimSpace(rest)
		line = ""
		switch {
		case keyword == "FROM":
			fields := strings.Fields(rest)
			fields = slices.DeleteFunc(fields, func(f string) bool { return strings.HasPrefix(f, "--platform=") })
			s := &stage{from: d.expand(fields[0])}
			if len(fields) == 3 && strings.EqualFold(fields[1], "AS") {
				s.name = fields[2]
			}
			d.stages = append(d.stages, s)
		case len(d.stages) == 0 && keyword == "ARG":
			name, value, _ := strings.Cut(rest, "=")
			d.args[name] = value
		case len(d.stages) > 0:
			s := d.stages[len(d.stages)-1]
			s.instructions = append(s.instructions, [2]string{keyword, rest})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(d.stages) == 0 {
		t.Fatalf("%s has no FROM", file)
	}
	return d
}

func (d *dockerfile) expand(s string) string {
	return os.Expand(s, func(name string) string { return d.args[name] })
}

func (s *stage) all(keyword string) []string {
	var out []string
	for _, in := range s.instructions {
		if in[0] == keyword {
			out = append(out, in[1])
		}
	}
	return out
}

// pinned: a version tag (not latest) or a digest.
var pinnedImage = regexp.MustCompile(`^[^:@\s]+(:[^:@\s]*[0-9][^:@\s]*)?(@sha256:[0-9a-f]{64})?$`)

// TestDockerfiles checks what can be checked of the images without building
// them: pinned base images, a static build, a final stage on an empty base
// running as the pod's non-root user, the ENTRYPOINT the Deployment runs, and
// a build context holding every package the binaries are built from.
func TestDockerfiles(t *testing.T) {
	t.Parallel()
	o := overlays(t)[0]
	dep := deployment(t, render(t, o.dir))
	pod := &dep.Spec.Template.Spec
	host := container(t, pod, "host")
	install := container(t, pod, "install-probe")

	type image struct {
		dockerfile string
		// entrypoint is what the Deployment runs; files must be in the
		// final stage as well.
		entrypoint []string
		files      []string
	}
	images := map[string]image{
		"host": {dockerfile: "Dockerfile", entrypoint: host.Command, files: []string{slices0(install.Command)}},
	}
	for _, o := range overlays(t) {
		ex := exampleOf(t, o)
		dep := deployment(t, render(t, o.dir))
		images[o.example] = image{dockerfile: ex.dockerfile, entrypoint: container(t, &dep.Spec.Template.Spec, "sidecar").Command}
	}
	for name, img := range images {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := parseDockerfile(t, img.dockerfile)
			for _, s := range d.stages {
				if s.from == "scratch" || slices.ContainsFunc(d.stages, func(o *stage) bool { return o.name == s.from }) {
					continue
				}
				ref := s.from
				if !pinnedImage.MatchString(ref) || (!strings.Contains(ref, "@") && !strings.Contains(path.Base(ref), ":")) || strings.HasSuffix(ref, ":latest") {
					t.Errorf("base image %q is not pinned to a version or a digest", ref)
				}
			}
			final := d.stages[len(d.stages)-1]

			users := final.all("USER")
			if len(users) == 0 {
				t.Fatal("the final stage sets no USER: it would run as root")
			}
			uid, _, _ := strings.Cut(users[len(users)-1], ":")
			if n, err := strconv.Atoi(uid); err != nil || n != imageUser {
				t.Errorf("USER %s: want the numeric user %d, which the pod runs as (a name cannot be checked against runAsNonRoot)", users[len(users)-1], imageUser)
			}

			entrypoints := final.all("ENTRYPOINT")
			var entrypoint []string
			if len(entrypoints) == 0 || json.Unmarshal([]byte(entrypoints[len(entrypoints)-1]), &entrypoint) != nil || len(entrypoint) == 0 {
				t.Fatalf("the final stage has no ENTRYPOINT in exec form: %q", entrypoints)
			}
			if !slices.Equal(entrypoint, img.entrypoint) {
				t.Errorf("ENTRYPOINT %q; the Deployment runs %q", entrypoint, img.entrypoint)
			}
			// What the final stage copies from the others: destination
			// (absolute) -> source.
			copied := map[string]string{}
			workdir := "/"
			for _, in := range final.instructions {
				switch in[0] {
				case "WORKDIR":
					workdir = path.Join(workdir, in[1])
				case "COPY":
					fields := strings.Fields(in[1])
					if len(fields) == 3 && strings.HasPrefix(fields[0], "--from=") {
						copied[path.Join(workdir, fields[2])] = fields[1]
					}
				}
			}
			for _, f := range append(slices.Clone(entrypoint), img.files...) {
				if !path.IsAbs(f) {
					continue // a program of the base image, such as node
				}
				if !slices.ContainsFunc(slices.Collect(maps.Keys(copied)), func(dst string) bool { return f == dst || strings.HasPrefix(f, dst+"/") }) {
					t.Errorf("the final stage runs %s, which no COPY --from=<stage> puts there", f)
				}
			}

			if goBuilds(d) {
				if final.from != "scratch" && !strings.Contains(final.from, "distroless") {
					t.Errorf("the final stage is FROM %s, want scratch or distroless for static Go binaries", final.from)
				}
				checkGoBuild(t, d, copied)
			}
			checkDockerignore(t, contextSources(d))
		})
	}
}

// goBuilds reports whether a stage builds Go binaries.
func goBuilds(d *dockerfile) bool {
	for _, s := range d.stages {
		for _, run := range s.all("RUN") {
			if goBuild.MatchString(run) {
				return true
			}
		}
	}
	return false
}

// goBuild matches a go build in a RUN line: its output and its package.
var goBuild = regexp.MustCompile(`go build [^&;]*?-o (\S+) (\./\S+)`)

// checkGoBuild: every binary copied into the final stage is built there by
// `go build`, static (CGO_ENABLED=0), from a build context holding go.mod,
// go.sum and every package of the module the binary imports.
func checkGoBuild(t *testing.T, d *dockerfile, copied map[string]string) {
	t.Helper()
	builds := map[string]string{} // output -> package
	var copiedDirs []string
	for _, s := range d.stages[:len(d.stages)-1] {
		for _, run := range s.all("RUN") {
			for _, m := range goBuild.FindAllStringSubmatch(run, -1) {
				builds[m[1]] = m[2]
				before, _, _ := strings.Cut(run, m[0])
				if i := strings.LastIndex(before, "&&"); i >= 0 {
					before = before[i:]
				}
				if !strings.Contains(before, "CGO_ENABLED=0") {
					t.Errorf("%s is not built with CGO_ENABLED=0: it would not run on an empty base image", m[2])
				}
			}
		}
		for _, c := range s.all("COPY") {
			fields := strings.Fields(c)
			if strings.HasPrefix(fields[0], "--") {
				continue
			}
			copiedDirs = append(copiedDirs, fields[:len(fields)-1]...)
		}
	}
	for dst, src := range copied {
		if dst == "/etc/ssl/certs/ca-certificates.crt" {
			continue
		}
		if _, ok := builds[src]; !ok {
			t.Errorf("the final stage copies %s from %s, which no go build writes", dst, src)
		}
	}
	for _, f := range []string{"go.mod", "go.sum"} {
		if !slices.Contains(copiedDirs, f) {
			t.Errorf("the builder does not copy %s", f)
		}
	}
	root := repo() + string(os.PathSeparator)
	for _, pkg := range builds {
		// The packages of the repository's modules (the workspace's: the
		// host's and the Go SDK's), with the directory of their module.
		cmd := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}} {{.Module.Dir}}{{end}}{{end}}", pkg)
		cmd.Dir = repo()
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderrOf(err))
		}
		modules := map[string]bool{}
		for line := range strings.Lines(string(out)) {
			dir, module, _ := strings.Cut(strings.TrimSpace(line), " ")
			rel := strings.TrimPrefix(dir, root) + "/"
			if !slices.ContainsFunc(copiedDirs, func(c string) bool { return strings.HasPrefix(rel, strings.TrimSuffix(c, "/")+"/") }) {
				t.Errorf("%s imports %s, which the builder does not copy", pkg, strings.TrimSuffix(rel, "/"))
			}
			modules[module] = true
		}
		// go mod download needs the go.mod and go.sum of every module the
		// build uses, the Go SDK's too (the host's module requires it
		// through a replace).
		for module := range modules {
			rel := strings.TrimPrefix(strings.TrimPrefix(module, strings.TrimSuffix(root, string(os.PathSeparator))), string(os.PathSeparator))
			for _, f := range []string{"go.mod", "go.sum"} {
				if f := path.Join(rel, f); !slices.Contains(copiedDirs, f) {
					t.Errorf("%s is built from the module in %q, whose %s the builder does not copy", pkg, "/"+rel, f)
				}
			}
		}
	}
}

// contextSources lists what the stages copy from the build context.
func contextSources(d *dockerfile) []string {
	var out []string
	for _, s := range d.stages {
		for _, c := range s.all("COPY") {
			fields := strings.Fields(c)
			if strings.HasPrefix(fields[0], "--") {
				continue
			}
			out = append(out, fields[:len(fields)-1]...)
		}
	}
	return out
}

// checkDockerignore: .dockerignore leaves in what the builders copy.
func checkDockerignore(t *testing.T, copied []string) {
	t.Helper()
	data, err := os.ReadFile(repo(".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		pattern := strings.TrimSuffix(strings.TrimSpace(line), "/")
		if pattern == "" || strings.HasPrefix(pattern, "#") || strings.HasPrefix(pattern, "**") || strings.HasPrefix(pattern, "*") {
			continue
		}
		for _, c := range copied {
			if strings.TrimSuffix(c, "/") == pattern || strings.HasPrefix(c, pattern+"/") {
				t.Errorf(".dockerignore leaves out %s, which a builder copies", c)
			}
		}
	}
}
