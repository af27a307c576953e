package benchmark

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of the CPU times in /proc/<pid>/stat: 100
// on every Linux architecture polyop runs on.
const clockTicks = 100

// procStats is what /proc says about one process.
type procStats struct {
	// CPU is the user and system CPU time the process has used.
	CPU time.Duration
	// RSS is its resident set size now, in bytes.
	RSS int64
	// PeakRSS is the largest its resident set has been (VmHWM), in bytes.
	PeakRSS int64
	// AnonRSS is the anonymous part of RSS (RssAnon: heap, stacks), in
	// bytes; the rest is mostly the program's own code and data, mapped from
	// its file.
	AnonRSS int64
}

// readProc reads /proc/<pid>/stat and /proc/<pid>/status.
func readProc(pid int) (procStats, error) {
	var s procStats
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	// The command name, in parentheses, may hold spaces: the fields that
	// follow it start after the last ')'. utime and stime are fields 14 and
	// 15 of the line, 12 and 13 after the name.
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return s, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(string(stat[end+1:]))
	if len(fields) < 13 {
		return s, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return s, fmt.Errorf("/proc/%d/stat: CPU times %q %q", pid, fields[11], fields[12])
	}
	s.CPU = time.Duration(utime+stime) * time.Second / clockTicks

	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var dst *int64
		switch key {
		case "VmRSS":
			dst = &s.RSS
		case "VmHWM":
			dst = &s.PeakRSS
		case "RssAnon":
			dst = &s.AnonRSS
		default:
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return s, fmt.Errorf("/proc/%d/status: %s: %w", pid, key, err)
		}
		*dst = kb << 10
	}
	return s, nil
}
