package console

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// With input at its end (a pipe), a pending approval can never be answered:
// Run says so and fails instead of waiting forever.
func TestPipeEndedWithPendingApprovalFails(t *testing.T) {
	in, out, finish := startConsole(t, newSim())
	fmt.Fprintln(in, "deploy")
	out.waitFor(t, "Approve? type a")
	err := finish()
	if !errors.Is(err, ErrUnanswerable) {
		t.Fatalf("Run = %v, want ErrUnanswerable", err)
	}
	out.waitFor(t, "nobody can answer it")
}

// A line over the message limit is reported and skipped; the next line
// still works, and Run does not fail.
func TestLongLineIsReportedAndSkipped(t *testing.T) {
	s := newSim()
	in, out, finish := startConsole(t, s)
	go func() {
		fmt.Fprintln(in, strings.Repeat("x", 2<<20)) // 2 MiB: used to end the process
		fmt.Fprintln(in, "/session")
	}()
	out.waitFor(t, fmt.Sprintf("that line is %d bytes; a message may be at most %d bytes", 2<<20, MaxLineBytes))
	out.waitFor(t, "Current session: default")
	if err := finish(); err != nil {
		t.Fatal(err)
	}
	if sent := s.Sent(); len(sent) != 0 {
		t.Errorf("the long line reached the session: %d messages", len(sent))
	}
}

func TestReadLines(t *testing.T) {
	type got struct {
		line    string
		tooLong int
	}
	cases := []struct {
		in   string
		max  int
		want []got
	}{
		{"a\nbb\r\nccc", 10, []got{{"a", 0}, {"bb", 0}, {"ccc", 0}}},
		{"0123456789\n01234567890\nok\n", 10, []got{{"0123456789", 0}, {"", 11}, {"ok", 0}}},
		{"01234567890", 10, []got{{"", 11}}},
		{"", 10, nil},
	}
	for _, c := range cases {
		var lines []got
		err := readLines(strings.NewReader(c.in), c.max, func(l string, n int) bool {
			lines = append(lines, got{l, n})
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(lines) != fmt.Sprint(c.want) {
			t.Errorf("readLines(%q) = %v, want %v", c.in, lines, c.want)
		}
	}
	// Long lines across the reader's buffer are counted whole.
	big := strings.Repeat("y", 200<<10)
	var sizes []int
	_ = readLines(strings.NewReader(big+"\nz\n"), MaxLineBytes, func(l string, n int) bool {
		sizes = append(sizes, n+len(l))
		return true
	})
	if fmt.Sprint(sizes) != fmt.Sprint([]int{200 << 10, 1}) {
		t.Errorf("sizes = %v", sizes)
	}
}
