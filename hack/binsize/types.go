package main

import (
	"cmp"
	"encoding/binary"
	"slices"
)

// The kinds of internal/abi.Kind whose descriptors carry more than
// abi.Type.
const (
	kindArray     = 17
	kindChan      = 18
	kindFunc      = 19
	kindInterface = 20
	kindMap       = 21
	kindPointer   = 22
	kindSlice     = 23
	kindStruct    = 25
	kindMask      = 1<<5 - 1

	tflagUncommon = 1 << 0

	nameHasTag     = 1 << 1
	nameHasPkgPath = 1 << 2
)

// typeWalker finds the type descriptors of a Go 1.26 binary (64-bit) and
// the names they use, and who owns each.
//
// The linker lays out the type descriptors (internal/abi.Type and what
// follows it: the kind's fields, UncommonType, a struct's fields, a func's
// parameters, an interface's and a defined type's methods) and their names
// (internal/abi.Name) between runtime.types and go:string.*, sorted by size,
// with no symbol table entry. DWARF gives the descriptor of every type it
// describes; the walk reads each descriptor's extent and follows its
// references (element, key, pointer-to, field, parameter and method types)
// to those DWARF does not describe.
//
// A descriptor belongs to the package DWARF's name for it spells, else to
// its defining package (UncommonType.PkgPath), else to the package of the
// descriptor the walk reached it from. A name belongs to the first
// descriptor the walk finds using it.
type typeWalker struct {
	data       []byte // the section holding the descriptors
	base       uint64 // the section's address
	start, end uint64 // runtime.types, the end of the descriptors and names
	bo         binary.ByteOrder
	known      map[string]bool

	owner map[uint64]string // descriptor -> package; "" for none
	size  map[uint64]uint64 // descriptor -> its extent
	names map[uint64]string // name -> package of the descriptor that claimed it
	queue []typeRef
}

// A typeRef is a descriptor to walk and the package that reached it.
type typeRef struct {
	addr uint64
	from string
}

// walk walks the descriptors from DWARF's, anchors, and returns the bytes
// of descriptors and names by package ("" for those of no package), and
// how many bytes of [start, end) no descriptor or name it found covers.
func (w *typeWalker) walk(anchors []typeDescriptor) (byPackage map[string]int64, unknown int64) {
	w.owner, w.size, w.names = map[uint64]string{}, map[uint64]uint64{}, map[uint64]string{}
	// Descriptors named by DWARF first, so that a package's own types are
	// its own even when another package's type reaches them first.
	for _, a := range anchors {
		if _, seen := w.owner[a.addr]; !seen && w.in(a.addr, 48) {
			w.owner[a.addr] = typePackage(a.name, w.known)
			w.queue = append(w.queue, typeRef{addr: a.addr})
		}
	}
	for len(w.queue) > 0 {
		r := w.queue[0]
		w.queue = w.queue[1:]
		w.visit(r)
	}
	byPackage = map[string]int64{}
	type extent struct{ start, end uint64 }
	var covered []extent
	for addr, pkg := range w.owner {
		byPackage[pkg] += int64(w.size[addr])
		covered = append(covered, extent{addr, addr + w.size[addr]})
	}
	for addr, pkg := range w.names {
		n := w.nameLen(addr)
		byPackage[pkg] += int64(n)
		covered = append(covered, extent{addr, addr + n})
	}
	// What is left: the region minus the union of what was found.
	slices.SortFunc(covered, func(a, b extent) int { return cmp.Compare(a.start, b.start) })
	at := w.start
	for _, e := range covered {
		if e.start > at {
			unknown += int64(e.start - at)
		}
		at = max(at, e.end)
	}
	if w.end > at {
		unknown += int64(w.end - at)
	}
	// A descriptor or name that overlaps another was misread: count the
	// overlap as unknown rather than twice.
	var sum int64
	for _, n := range byPackage {
		sum += n
	}
	if over := sum + unknown - int64(w.end-w.start); over > 0 {
		byPackage[""] -= over
	}
	return byPackage, unknown
}

func (w *typeWalker) in(addr, n uint64) bool {
	return addr >= w.start && addr+n <= w.end && addr >= w.base && addr+n <= w.base+uint64(len(w.data))
}

func (w *typeWalker) u16(addr uint64) uint64 { return uint64(w.bo.Uint16(w.data[addr-w.base:])) }
func (w *typeWalker) u32(addr uint64) uint64 { return uint64(w.bo.Uint32(w.data[addr-w.base:])) }
func (w *typeWalker) u64(addr uint64) uint64 { return w.bo.Uint64(w.data[addr-w.base:]) }

// off turns a NameOff or TypeOff into an address; 0 for none.
func (w *typeWalker) off(o uint64) uint64 {
	if int32(o) <= 0 {
		return 0
	}
	return w.start + o
}

// visit reads the descriptor at r.addr, claims its names and queues the
// descriptors it refers to.
func (w *typeWalker) visit(r typeRef) {
	addr := r.addr
	pkg, seen := w.owner[addr]
	if _, done := w.size[addr]; done || !w.in(addr, 48) {
		return
	}
	tflag, kind := w.data[addr-w.base+20], w.data[addr-w.base+23]&kindMask
	var refs []uint64
	var names []uint64
	names = append(names, w.off(w.u32(addr+40)))
	refs = append(refs, w.off(w.u32(addr+44))) // PtrToThis
	n := uint64(48)
	var arrayAt, arrayLen, arrayElem uint64 // a struct's fields, an interface's methods
	switch kind {
	case kindArray:
		refs = append(refs, w.u64(addr+48), w.u64(addr+56))
		n = 72
	case kindChan:
		refs = append(refs, w.u64(addr+48))
		n = 64
	case kindFunc:
		n = 56
	case kindInterface:
		names = append(names, w.u64(addr+48))
		arrayAt, arrayLen, arrayElem = w.u64(addr+56), w.u64(addr+64), 8
		n = 80
	case kindMap:
		refs = append(refs, w.u64(addr+48), w.u64(addr+56), w.u64(addr+64))
		n = 112
	case kindPointer, kindSlice:
		refs = append(refs, w.u64(addr+48))
		n = 56
	case kindStruct:
		names = append(names, w.u64(addr+48))
		arrayAt, arrayLen, arrayElem = w.u64(addr+56), w.u64(addr+64), 24
		n = 80
	}
	end := addr + n
	if !w.in(addr, n) {
		return
	}
	var pkgPath uint64
	var methodsAt, methods uint64
	if tflag&tflagUncommon != 0 && w.in(end, 16) {
		u := end
		pkgPath = w.off(w.u32(u))
		methods, methodsAt = w.u16(u+4), u+w.u32(u+8)
		names = append(names, pkgPath)
		end = u + 16
	}
	if kind == kindFunc {
		params := w.u16(addr+48) + w.u16(addr+50)&0x7fff
		if w.in(end, 8*params) {
			for i := range params {
				refs = append(refs, w.u64(end+8*i))
			}
			end += 8 * params
		}
	}
	// A struct's fields and an interface's methods follow the descriptor;
	// an array elsewhere (an empty one) is not the descriptor's.
	if arrayAt >= addr && arrayAt <= end+8 && w.in(arrayAt, arrayLen*arrayElem) {
		for i := range arrayLen {
			e := arrayAt + i*arrayElem
			if kind == kindStruct {
				names = append(names, w.u64(e))
				refs = append(refs, w.u64(e+8))
			} else {
				names = append(names, w.off(w.u32(e)))
				refs = append(refs, w.off(w.u32(e+4)))
			}
		}
		end = max(end, arrayAt+arrayLen*arrayElem)
	}
	if methods > 0 && w.in(methodsAt, 16*methods) {
		for i := range methods {
			m := methodsAt + 16*i
			names = append(names, w.off(w.u32(m)))
			refs = append(refs, w.off(w.u32(m+4)))
		}
		end = max(end, methodsAt+16*methods)
	}

	if !seen {
		pkg = r.from
		if p := w.nameString(pkgPath); p != "" && w.known[p] {
			pkg = p
		}
		w.owner[addr] = pkg
	}
	w.size[addr] = end - addr
	for _, name := range names {
		if _, claimed := w.names[name]; !claimed && name != 0 && w.in(name, 2) {
			w.names[name] = pkg
		}
	}
	for _, ref := range refs {
		if _, done := w.size[ref]; !done && ref != 0 && w.in(ref, 48) {
			w.queue = append(w.queue, typeRef{addr: ref, from: pkg})
		}
	}
}

// nameLen returns the length of the internal/abi.Name at addr.
func (w *typeWalker) nameLen(addr uint64) uint64 {
	b := w.data[addr-w.base:]
	l, k := binary.Uvarint(b[1:])
	n := 1 + uint64(k) + l
	if b[0]&nameHasTag != 0 && n < uint64(len(b)) {
		l, k := binary.Uvarint(b[n:])
		n += uint64(k) + l
	}
	if b[0]&nameHasPkgPath != 0 {
		n += 4
	}
	return n
}

// nameString returns the string of the internal/abi.Name at addr, "" for 0.
func (w *typeWalker) nameString(addr uint64) string {
	if addr == 0 || !w.in(addr, 2) {
		return ""
	}
	b := w.data[addr-w.base:]
	l, k := binary.Uvarint(b[1:])
	if k <= 0 || uint64(len(b)) < 1+uint64(k)+l {
		return ""
	}
	return string(b[1+k : 1+uint64(k)+l])
}
