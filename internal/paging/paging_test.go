package paging

import (
	"strconv"
	"testing"

	"github.com/studio/operator/internal/protocol"
)

func TestCursorRoundTripAndListTag(t *testing.T) {
	t.Parallel()
	c := Cursor{List: "runs", At: 12.5, ID: "x"}
	got, err := Decode(c.Encode(), "runs")
	if err != nil || got != c {
		t.Fatalf("decode: %+v %v", got, err)
	}
	for _, bad := range []string{c.Encode() + "!", "bm90IGpzb24", Cursor{List: "audit"}.Encode()} {
		if _, err := Decode(bad, "runs"); !protocol.IsCode(err, protocol.Validation) {
			t.Errorf("cursor %q: %v", bad, err)
		}
	}
	if got, err := Decode("", "runs"); err != nil || got != (Cursor{}) {
		t.Fatalf("first page: %+v %v", got, err)
	}
}

func TestLimit(t *testing.T) {
	t.Parallel()
	for in, want := range map[int]int{0: DefaultLimit, 1: 1, MaxLimit: MaxLimit} {
		if got, err := Limit(in); err != nil || got != want {
			t.Errorf("Limit(%d) = %d %v", in, got, err)
		}
	}
	for _, in := range []int{-1, MaxLimit + 1} {
		if _, err := Limit(in); !protocol.IsCode(err, protocol.Validation) {
			t.Errorf("Limit(%d): %v", in, err)
		}
	}
}

func TestCut(t *testing.T) {
	t.Parallel()
	view := func(n int) string { return strconv.Itoa(n) }
	next := func(n int) Cursor { return Cursor{List: "n", Seq: int64(n)} }
	page, cur := Cut([]int{1, 2, 3}, 2, view, next)
	if len(page) != 2 || page[1] != "2" || cur != (Cursor{List: "n", Seq: 2}).Encode() {
		t.Fatalf("page %v cursor %q", page, cur)
	}
	page, cur = Cut([]int{1, 2}, 2, view, next)
	if len(page) != 2 || cur != "" {
		t.Fatalf("last page %v cursor %q", page, cur)
	}
	if page, _ := Cut(nil, 2, view, next); page == nil {
		t.Fatal("an empty page must not be nil")
	}
}
