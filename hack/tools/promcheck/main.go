// Command promcheck checks polyop's Prometheus alerting rules and Grafana
// dashboard with Prometheus's own parsers, and lists the metric names their
// queries read, so that a test can compare them with what the host exports.
//
//	promcheck RULES.yaml DASHBOARD.json
//
// It parses RULES.yaml (a PrometheusRule's spec, or a plain rule file) as
// Prometheus loads a rule file (rulefmt: groups, names, durations, labels,
// annotation templates, every expression by the PromQL parser), and every
// expression of DASHBOARD.json's panels by the PromQL parser, with Grafana's
// variables ($__rate_interval, $controller, ...) replaced by values of their
// type. It prints the metric names the expressions read, one a line, sorted;
// it exits 1 and prints every problem on standard error when a file does not
// parse.
//
// It is a module of its own (hack/tools/promcheck, outside the workspace) so
// that Prometheus's dependencies never enter the host's.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: promcheck RULES.yaml DASHBOARD.json")
		os.Exit(2)
	}
	names := map[string]bool{}
	errs := append(checkRules(os.Args[1], names), checkDashboard(os.Args[2], names)...)
	if len(errs) > 0 {
		for _, err := range errs {
			fmt.Fprintln(os.Stderr, err)
		}
		os.Exit(1)
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	slices.Sort(sorted)
	for _, n := range sorted {
		fmt.Println(n)
	}
}

// checkRules parses the rule file at path, a PrometheusRule (whose spec is
// a rule file) or a rule file, and adds the metric names of its expressions.
func checkRules(path string, names map[string]bool) []error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return []error{err}
	}
	var obj struct {
		Kind string    `yaml:"kind"`
		Spec yaml.Node `yaml:"spec"`
	}
	if err := yaml.Unmarshal(raw, &obj); err != nil {
		return []error{fmt.Errorf("%s: %w", path, err)}
	}
	if obj.Kind == "PrometheusRule" {
		if raw, err = yaml.Marshal(&obj.Spec); err != nil {
			return []error{fmt.Errorf("%s: %w", path, err)}
		}
	}
	groups, errs := rulefmt.Parse(raw, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		for i, err := range errs {
			errs[i] = fmt.Errorf("%s: %w", path, err)
		}
		return errs
	}
	if len(groups.Groups) == 0 {
		return []error{fmt.Errorf("%s: no rule groups", path)}
	}
	var out []error
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if err := addNames(r.Expr, names); err != nil {
				out = append(out, fmt.Errorf("%s: rule %s%s: %w", path, r.Alert, r.Record, err))
			}
		}
	}
	return out
}

// A dashboard's panels (nested in rows) and their targets.
type panel struct {
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

type dashboard struct {
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// grafanaVar matches a Grafana variable: $name, ${name} or ${name:format}.
var grafanaVar = regexp.MustCompile(`\$\{?(\w+)(:\w+)?\}?`)

// substitute replaces Grafana's variables in expr: interval ones by a
// duration, every other by a word.
func substitute(expr string) string {
	return grafanaVar.ReplaceAllStringFunc(expr, func(v string) string {
		if strings.Contains(v, "interval") || strings.Contains(v, "range") {
			return "5m"
		}
		return "x"
	})
}

// checkDashboard parses every query of the dashboard at path and adds the
// metric names it reads.
func checkDashboard(path string, names map[string]bool) []error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return []error{err}
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		return []error{fmt.Errorf("%s: %w", path, err)}
	}
	var out []error
	count := 0
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			for _, t := range p.Targets {
				count++
				if err := addNames(substitute(t.Expr), names); err != nil {
					out = append(out, fmt.Errorf("%s: panel %q: %w", path, p.Title, err))
				}
			}
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		query, _ := v.Query.(string)
		if q, ok := v.Query.(map[string]any); ok {
			query, _ = q["query"].(string)
		}
		if s := query; s != "" {
			// label_values(metric, label)
			if m := regexp.MustCompile(`^label_values\((\w+)\s*[,{]`).FindStringSubmatch(s); m != nil {
				names[m[1]] = true
			}
		}
	}
	if count == 0 {
		out = append(out, fmt.Errorf("%s: no queries", path))
	}
	return out
}

// addNames parses expr and adds every metric name it selects.
func addNames(expr string, names map[string]bool) error {
	if strings.TrimSpace(expr) == "" {
		return errors.New("empty expression")
	}
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return fmt.Errorf("%q: %w", expr, err)
	}
	found := false
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			if vs.Name == "" {
				return nil
			}
			names[vs.Name] = true
			found = true
		}
		return nil
	})
	if !found {
		return fmt.Errorf("%q selects no metric by name", expr)
	}
	return nil
}
