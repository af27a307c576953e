package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/polyop/polyop/test/benchmark"
)

func TestUpdateSection(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		before, want string
		fails        bool
	}{
		"if the file has the markers, then what lies between them is replaced": {
			before: "# B\n\nintro\n" + benchmark.BeginMarker + "\nold table\n" + benchmark.EndMarker + "\n\nnotes\n",
			want:   "# B\n\nintro\n" + benchmark.BeginMarker + "\nnew table\n" + benchmark.EndMarker + "\n\nnotes\n",
		},
		"if the file has no markers, then it fails and the file is left alone": {
			before: "# B\n\nno markers\n",
			want:   "# B\n\nno markers\n",
			fails:  true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
			if err := os.WriteFile(path, []byte(tc.before), 0o644); err != nil {
				t.Fatal(err)
			}
			err := updateSection(path, "new table\n")
			if (err != nil) != tc.fails {
				t.Fatalf("updateSection: error %v, want failure %v", err, tc.fails)
			}
			got, _ := os.ReadFile(path)
			if string(got) != tc.want {
				t.Errorf("the file is\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestParseCounts(t *testing.T) {
	t.Parallel()
	if got, err := parseCounts("-sizes", "500, 2_000,10000"); err != nil || !slices.Equal(got, []int{500, 2000, 10000}) {
		t.Errorf("parseCounts = %v, %v; want [500 2000 10000]", got, err)
	}
	for _, bad := range []string{"500,-1", "0", "many"} {
		if _, err := parseCounts("-sizes", bad); err == nil {
			t.Errorf("parseCounts(%q) succeeded", bad)
		}
	}
}
