package main

import (
	"cmp"
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
)

// sizes is what a package, or a module, takes in a binary: its functions'
// code (text); its named read-only data, type descriptors and functions'
// GC and inlining tables (rodata; the latter live in .gopclntab since Go
// 1.22 and count there instead); its functions' entries in the PC-line
// table, their PC-value tables and names (pclntab); and its variables'
// initial values (data). Bytes, in the file.
type sizes struct {
	Text    int64 `json:"text"`
	Rodata  int64 `json:"rodata"`
	Pclntab int64 `json:"pclntab"`
	Data    int64 `json:"data"`
}

// Total is the sum of the columns.
func (s sizes) Total() int64 { return s.Text + s.Rodata + s.Pclntab + s.Data }

func (s *sizes) add(o sizes) {
	s.Text += o.Text
	s.Rodata += o.Rodata
	s.Pclntab += o.Pclntab
	s.Data += o.Data
}

// A column is one of sizes' fields.
type column int

const (
	textColumn column = iota
	rodataColumn
	pclntabColumn
	dataColumn
)

func (s *sizes) addTo(c column, n int64) {
	switch c {
	case textColumn:
		s.Text += n
	case rodataColumn:
		s.Rodata += n
	case pclntabColumn:
		s.Pclntab += n
	case dataColumn:
		s.Data += n
	}
}

// sectionColumn is the column a section's bytes count in, and false for a
// section the program does not load (DWARF, the symbol table) or that
// takes no room in the file (.bss).
func sectionColumn(s *elf.Section) (column, bool) {
	if s.Flags&elf.SHF_ALLOC == 0 || s.Type == elf.SHT_NOBITS {
		return 0, false
	}
	switch s.Name {
	case ".text":
		return textColumn, true
	case ".rodata", ".typelink", ".itablink":
		return rodataColumn, true
	case ".gopclntab":
		return pclntabColumn, true
	}
	return dataColumn, true
}

// analysis is a binary's size attributed to the packages its symbols name.
type analysis struct {
	// Packages holds each package's sizes, by the path its symbols spell
	// ("main" for the command's package).
	Packages map[string]*sizes
	// Unattributed holds, by what they are, the bytes of the loaded sections
	// that no package's symbol names: strings, the PC-line table's file
	// tables, alignment.
	Unattributed map[string]*sizes
	// Sections is the size of every section of the file, loaded or not.
	Sections []section
}

// A section is an ELF section's name and size in the file.
type section struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
}

// analyze attributes the loaded sections of the ELF binary at path, which
// must be built without -s and -w (it reads the symbol table and DWARF), to
// the packages of known.
//
//   - .text: each function's code, from the PC-line table's function table
//     (one function's code ends where the next one's starts).
//   - .gopclntab: each function's entry and _func record, its name, and its
//     PC-value tables (shared tables split among the functions that share
//     them); the inlining and GC tables its funcdata points at in go:func.*
//     (one table ends where the next starts) and the names of the functions
//     inlined into it, each counted once.
//   - .rodata: type descriptors and their names, as typeWalker finds and
//     attributes them; named symbols by their names.
//   - .noptrdata, .data and the rest: named symbols by their names.
//
// What is left of each section (strings, file tables, headers, alignment)
// is unattributed.
func analyze(path string, known map[string]bool) (*analysis, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if f.Class != elf.ELFCLASS64 {
		return nil, errors.New("the type descriptors of a 32-bit binary are not supported")
	}
	a := &analysis{Packages: map[string]*sizes{}, Unattributed: map[string]*sizes{}}
	for _, s := range f.Sections {
		size := int64(s.FileSize)
		if s.Type == elf.SHT_NOBITS {
			size = 0
		}
		if s.Name != "" {
			a.Sections = append(a.Sections, section{Name: s.Name, Size: size})
		}
	}
	syms, err := f.Symbols()
	if err != nil {
		return nil, fmt.Errorf("%s has no symbol table (built with -s?): %w", path, err)
	}
	addr := map[string]uint64{}
	size := map[string]uint64{}
	for _, s := range syms {
		addr[s.Name] = s.Value
		size[s.Name] = s.Size
	}
	attributed := map[*elf.Section]int64{}
	attribute := func(sec *elf.Section, pkg string, n int64) {
		c, ok := sectionColumn(sec)
		if !ok || n == 0 {
			return
		}
		p := a.Packages[pkg]
		if p == nil {
			p = &sizes{}
			a.Packages[pkg] = p
		}
		p.addTo(c, n)
		attributed[sec] += n
	}
	leave := func(sec *elf.Section, what string, n int64) {
		c, ok := sectionColumn(sec)
		if !ok || n == 0 {
			return
		}
		u := a.Unattributed[what]
		if u == nil {
			u = &sizes{}
			a.Unattributed[what] = u
		}
		u.addTo(c, n)
		attributed[sec] += n
	}
	sectionAt := func(addr uint64) *elf.Section {
		for _, s := range f.Sections {
			if s.Flags&elf.SHF_ALLOC != 0 && addr >= s.Addr && addr < s.Addr+s.Size {
				return s
			}
		}
		return nil
	}
	// Functions: code, PC-line table, funcdata.
	if err := a.functions(f, addr["go:func.*"], size["go:func.*"], sectionAt, attribute, leave, known); err != nil {
		return nil, err
	}

	// Type descriptors, by DWARF.
	typesStart, typesEnd := addr["runtime.types"], addr["go:string.*"]
	if typesEnd <= typesStart {
		typesEnd = addr["runtime.etypes"]
	}
	if typesStart != 0 && typesEnd > typesStart {
		sec := sectionAt(typesStart)
		anchors, err := dwarfTypes(f, typesStart, typesEnd)
		if err != nil {
			return nil, err
		}
		data, err := sec.Data()
		if err != nil {
			return nil, err
		}
		w := &typeWalker{data: data, base: sec.Addr, start: typesStart, end: typesEnd, bo: f.ByteOrder, known: known}
		byPackage, unknown := w.walk(anchors)
		for pkg, n := range byPackage {
			if pkg == "" {
				leave(sec, "type descriptors of built-in types", n)
			} else {
				attribute(sec, pkg, n)
			}
		}
		leave(sec, "type data not found by the walk", unknown)
	}

	// Strings: from go:string.* to the next symbol.
	if start, ok := addr["go:string.*"]; ok {
		end := uint64(0)
		for _, s := range syms {
			if s.Value > start && (end == 0 || s.Value < end) {
				end = s.Value
			}
		}
		if sec := sectionAt(start); sec != nil && end > start && end <= sec.Addr+sec.Size {
			leave(sec, "strings (go:string.*)", int64(end-start))
		}
	}

	// Named symbols outside .text and go:func.*.
	for _, s := range syms {
		if s.Size == 0 || s.Name == "go:func.*" || elf.ST_TYPE(s.Info) == elf.STT_FUNC {
			continue
		}
		if int(s.Section) <= 0 || int(s.Section) >= len(f.Sections) {
			continue
		}
		sec := f.Sections[s.Section]
		if sec.Name == ".text" {
			continue
		}
		if pkg := symbolPackage(s.Name, known); pkg != "" && known[pkg] {
			attribute(sec, pkg, int64(s.Size))
		} else {
			leave(sec, "symbols of no package (linker's, assembly constants)", int64(s.Size))
		}
	}

	// What is left of each section.
	for _, s := range f.Sections {
		if _, ok := sectionColumn(s); !ok {
			continue
		}
		if rest := int64(s.Size) - attributed[s]; rest > 0 {
			leave(s, "rest of "+s.Name+" (headers, tables, alignment)", rest)
		}
	}
	return a, nil
}

// A typeDescriptor is a Go type's descriptor's address and the type's name.
type typeDescriptor struct {
	addr uint64
	name string
}

// dwAtGoRuntimeType is the Go linker's DWARF attribute holding where a type's
// runtime descriptor is.
const dwAtGoRuntimeType dwarf.Attr = 0x2904

// dwarfTypes returns the type descriptors in [start, end) DWARF describes,
// with DWARF's names for their types, sorted by address, one per address.
func dwarfTypes(f *elf.File, start, end uint64) ([]typeDescriptor, error) {
	d, err := f.DWARF()
	if err != nil {
		return nil, fmt.Errorf("reading DWARF (built with -w?): %w", err)
	}
	var types []typeDescriptor
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			return nil, err
		}
		if e == nil {
			break
		}
		at, ok := e.Val(dwAtGoRuntimeType).(uint64)
		if !ok || at == 0 {
			continue
		}
		if at < start {
			// Since Go 1.26 the linker writes the descriptor's offset from
			// runtime.types rather than its address.
			at += start
		}
		if at >= end {
			continue
		}
		name, _ := e.Val(dwarf.AttrName).(string)
		types = append(types, typeDescriptor{addr: at, name: name})
	}
	slices.SortStableFunc(types, func(a, b typeDescriptor) int { return cmp.Compare(a.addr, b.addr) })
	return slices.CompactFunc(types, func(a, b typeDescriptor) bool { return a.addr == b.addr }), nil
}

// The runtime's funcdata index of a function's inlining tree
// (internal/abi.FUNCDATA_InlTree) and the size of one of its entries
// (runtime.inlinedCall).
const (
	funcdataInlTree  = 3
	inlinedCallSize  = 16
	funcRecordHeader = 44 // runtime._func without its pcdata and funcdata arrays
)

// functions attributes .text, the PC-line table and the funcdata (the
// gofuncSize bytes of the symbol go:func.* at gofunc) to the packages of the
// functions' names.
func (a *analysis) functions(f *elf.File, gofunc, gofuncSize uint64,
	sectionAt func(uint64) *elf.Section,
	attribute func(*elf.Section, string, int64),
	leave func(*elf.Section, string, int64),
	known map[string]bool,
) error {
	pcln := f.Section(".gopclntab")
	text := f.Section(".text")
	if pcln == nil || text == nil {
		return errors.New("no .gopclntab or .text section")
	}
	data, err := pcln.Data()
	if err != nil {
		return err
	}
	bo := f.ByteOrder
	if len(data) < 72 || bo.Uint32(data) != 0xfffffff1 {
		return errors.New("the PC-line table is not Go 1.20's or later")
	}
	ptrSize := int(data[7])
	word := func(i int) int {
		off := 8 + i*ptrSize
		if ptrSize == 4 {
			return int(bo.Uint32(data[off:]))
		}
		return int(bo.Uint64(data[off:]))
	}
	nfunc := word(0)
	// pcHeader: magic, pads, nfunc, nfiles, unused, funcnameOffset, cuOffset,
	// filetabOffset, pctabOffset, pclnOffset (runtime/symtab.go).
	funcnametab, pctab, functab := data[word(3):], data[word(6):], data[word(7):]
	u32 := func(b []byte, off int) uint32 { return bo.Uint32(b[off:]) }
	cstring := func(off uint32) string {
		b := funcnametab[off:]
		if i := slices.Index(b, 0); i >= 0 {
			b = b[:i]
		}
		return string(b)
	}
	pkgOf := func(name string) string {
		if p := symbolPackage(name, known); known[p] {
			return p
		}
		return ""
	}

	var gofuncData []byte
	var gofuncSec *elf.Section
	if gofunc != 0 {
		gofuncSec = sectionAt(gofunc)
		if gofuncSec == nil {
			return errors.New("go:func.* is in no section")
		}
		all, err := gofuncSec.Data()
		if err != nil {
			return err
		}
		gofuncData = all[gofunc-gofuncSec.Addr : gofunc-gofuncSec.Addr+gofuncSize]
	}

	pcUsers := map[uint32][]string{} // PC-value table offset -> packages of the functions using it
	fdUsers := map[uint32][]string{} // funcdata offset -> packages of the functions using it
	inlTrees := map[uint32]bool{}    // funcdata offsets of inlining trees
	ownNames := map[uint32]bool{}    // funcnametab offsets of functions' own names
	for i := range nfunc {
		entry, next := u32(functab, 8*i), u32(functab, 8*(i+1))
		fn := functab[u32(functab, 8*i+4):]
		nameOff := u32(fn, 4)
		name := cstring(nameOff)
		ownNames[nameOff] = true
		pkg := pkgOf(name)
		npcdata, nfuncdata := int(u32(fn, 28)), int(fn[43])
		record := int64(8 + funcRecordHeader + 4*(npcdata+nfuncdata) + len(name) + 1)
		if pkg == "" {
			leave(text, "functions of no package", int64(next-entry))
			leave(pcln, "functions of no package", record)
		} else {
			attribute(text, pkg, int64(next-entry))
			attribute(pcln, pkg, record)
		}
		for _, off := range []uint32{u32(fn, 16), u32(fn, 20), u32(fn, 24)} {
			if off != 0 {
				pcUsers[off] = append(pcUsers[off], pkg)
			}
		}
		for k := range npcdata {
			if off := u32(fn, funcRecordHeader+4*k); off != 0 {
				pcUsers[off] = append(pcUsers[off], pkg)
			}
		}
		for k := range nfuncdata {
			off := u32(fn, funcRecordHeader+4*(npcdata+k))
			if off == ^uint32(0) || gofuncData == nil {
				continue
			}
			fdUsers[off] = append(fdUsers[off], pkg)
			if k == funcdataInlTree {
				inlTrees[off] = true
			}
		}
	}
	share := func(sec *elf.Section, n int64, users []string, what string) {
		for i, pkg := range users {
			part := n / int64(len(users))
			if i == 0 {
				part += n % int64(len(users))
			}
			if pkg == "" {
				leave(sec, what, part)
			} else {
				attribute(sec, pkg, part)
			}
		}
	}
	for off, users := range pcUsers {
		share(pcln, int64(pcvalueLen(pctab[off:])), users, "functions of no package")
	}
	offs := make([]uint32, 0, len(fdUsers))
	for off := range fdUsers {
		offs = append(offs, off)
	}
	slices.Sort(offs)
	inlinedNames := map[uint32]bool{}
	for i, off := range offs {
		end := uint32(len(gofuncData))
		if i+1 < len(offs) {
			end = offs[i+1]
		}
		share(gofuncSec, int64(end-off), fdUsers[off], "functions of no package")
		if inlTrees[off] {
			for e := off; e+inlinedCallSize <= end; e += inlinedCallSize {
				if n := u32(gofuncData, int(e)+4); !ownNames[n] {
					inlinedNames[n] = true
				}
			}
		}
	}
	for off := range inlinedNames {
		if int(off) >= len(funcnametab) {
			continue
		}
		name := cstring(off)
		if pkg := pkgOf(name); pkg != "" {
			attribute(pcln, pkg, int64(len(name)+1))
		} else {
			leave(pcln, "functions of no package", int64(len(name)+1))
		}
	}
	return nil
}

// pcvalueLen returns the length of the PC-value table at the start of b:
// pairs of a value delta and a PC delta, varints both, up to a zero value
// delta other than the first (runtime.step).
func pcvalueLen(b []byte) int {
	n := 0
	for first := true; n < len(b); first = false {
		v, k := binary.Uvarint(b[n:])
		if k <= 0 {
			return n
		}
		n += k
		if v == 0 && !first {
			return n
		}
		_, k = binary.Uvarint(b[n:])
		if k <= 0 {
			return n
		}
		n += k
	}
	return n
}

// fileSize returns the size of the file at path.
func fileSize(path string) (int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
