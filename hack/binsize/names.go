package main

import "strings"

// symbolPackage returns the import path of the package a linker symbol or
// function name belongs to, as the compiler spells it ("main" for the
// command's own package), or "" when the name belongs to none (the linker's
// own symbols, go:string.*, ...).
//
// A function or variable is named by its package's path, a dot, and the rest:
// k8s.io/api/core/v1.(*Pod).Marshal. The path ends at the first dot after its
// last slash (the compiler escapes a dot in the last element as %2e); generic
// type arguments and method receivers, which hold other paths, come after it.
// Type descriptors, their equality and hash functions and itabs are named by
// a type ("type:.eq.[8]internal/cpu.option", "go:itab.*os.File,io.Reader"):
// they belong to the first package the type's name spells.
func symbolPackage(name string, known map[string]bool) string {
	for _, prefix := range []string{"type:.eq.", "type:.hash.", "type:.namedata.", "type:", "go:itab."} {
		if rest, ok := strings.CutPrefix(name, prefix); ok {
			return typePackage(rest, known)
		}
	}
	if rest, ok := strings.CutPrefix(name, "go:"); ok {
		// The linker's own (go:string.*, go:buildid) and the methods of
		// unnamed struct types (go:struct { *pkg.T; ... }.Method).
		return typePackage(rest, known)
	}
	return qualifier(name)
}

// qualifier returns the package path a qualified name (pkg.Name...) starts
// with, or "" when it has none.
func qualifier(name string) string {
	end := len(name)
	if i := strings.IndexAny(name, "[("); i >= 0 {
		end = i
	}
	slash := strings.LastIndexByte(name[:end], '/')
	dot := strings.IndexByte(name[slash+1:], '.')
	if dot < 0 {
		return ""
	}
	return strings.ReplaceAll(name[:slash+1+dot], "%2e", ".")
}

// typePackage returns the first package of known a Go type's name spells:
// k8s.io/api/core/v1 for "*k8s.io/api/core/v1.Pod", for "[]k8s.io/api/core/v1.Pod"
// and for "map[string]k8s.io/api/core/v1.Pod"; "" for a type of built-in
// types only ("[]string", "func(int) error").
func typePackage(name string, known map[string]bool) string {
	for _, token := range strings.FieldsFunc(name, func(r rune) bool { return !isPathRune(r) }) {
		if p := qualifier(token); p != "" && known[p] {
			return p
		}
	}
	return ""
}

// isPathRune reports whether r can be part of a qualified Go name as the
// compiler spells it in a type's name.
func isPathRune(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return true
	case r == '_', r == '.', r == '/', r == '-', r == '~', r == '%':
		return true
	}
	return r >= 0x80
}
