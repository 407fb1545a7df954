package protocol_test

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"strconv"
	"testing"

	"github.com/studio/operator/internal/protocol"
)

// rfcSample is the input of RFC 8785 §3.2.2 (and Appendix... the example
// every JCS implementation is checked against), and rfcCanonical its
// expected canonical form from §3.2.4.
const (
	rfcSample = `{
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	rfcCanonical = `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],` +
		`"string":"€$\u000f\nA'B\"\\\\\"/"}`
)

func TestCanonicalizeRFC8785Sample(t *testing.T) {
	t.Parallel()
	got, err := protocol.Canonicalize([]byte(rfcSample))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != rfcCanonical {
		t.Fatalf("canonical form\n got %s\nwant %s", got, rfcCanonical)
	}
	// The input is not modified.
	in := []byte(rfcSample)
	if _, err := protocol.Canonicalize(in); err != nil || string(in) != rfcSample {
		t.Fatal("Canonicalize modified its input")
	}
}

// TestCanonicalizeSorting is RFC 8785 §3.2.3: members sorted by their names
// as arrays of UTF-16 code units, so U+1F600 (D83D DE00) sorts before U+FB33.
func TestCanonicalizeSorting(t *testing.T) {
	t.Parallel()
	in := `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`
	want := `{"\r":"Carriage Return","1":"One","` + "\u0080" + `":"Control","ö":"Latin Small Letter O With Diaeresis",` +
		`"€":"Euro Sign","😀":"Emoji: Grinning Face","` + "\ufb33" + `":"Hebrew Letter Dalet With Dagesh"}`
	got, err := protocol.Canonicalize([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("sorted\n got %q\nwant %q", got, want)
	}
	// Nested objects are sorted too, arrays keep their order.
	got, err = protocol.Canonicalize([]byte(`{"b":[3,1,{"z":1,"a":2}],"a":{"d":null,"c":true}}`))
	if err != nil || string(got) != `{"a":{"c":true,"d":null},"b":[3,1,{"a":2,"z":1}]}` {
		t.Fatalf("nested = %s, %v", got, err)
	}
}

// TestCanonicalizeNumbers: ECMAScript number serialization, RFC 8785
// Appendix B, given as IEEE 754 bit patterns, plus literal samples.
func TestCanonicalizeNumbers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"}, // minus zero
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	} {
		in := strconv.FormatFloat(math.Float64frombits(tc.bits), 'g', -1, 64)
		got, err := protocol.Canonicalize([]byte("[" + in + "]"))
		if err != nil {
			t.Fatalf("%016x (%s): %v", tc.bits, in, err)
		}
		if string(got) != "["+tc.want+"]" {
			t.Errorf("%016x (%s) = %s, want [%s]", tc.bits, in, got, tc.want)
		}
	}
	for in, want := range map[string]string{
		"1e+30": "1e+30", "1E30": "1e+30", "4.50": "4.5", "0.000001": "0.000001", "1e-7": "1e-7",
		"2e-3": "0.002", "100": "100", "1e2": "100", "-0.0": "0", "1e21": "1e+21", "1e20": "100000000000000000000",
		"0.1e1": "1", "123456789012345678901234567890": "1.2345678901234568e+29",
		// Underflow rounds to zero like any other IEEE rounding; overflow is refused.
		"1e-400": "0",
	} {
		got, err := protocol.Canonicalize([]byte(in))
		if err != nil || string(got) != want {
			t.Errorf("Canonicalize(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
}

func TestCanonicalizeRefuses(t *testing.T) {
	t.Parallel()
	for _, in := range []string{``, `{`, `{"a":1,"a":2}`, `{"a":1} {}`, `[1,]`, "\"\xff\"", `1e400`, `-1e400`, `{"a":[1e309]}`, `NaN`} {
		if _, err := protocol.Canonicalize([]byte(in)); !protocol.IsCode(err, protocol.Validation) {
			t.Errorf("Canonicalize(%q) = %v, want validation", in, err)
		}
		if _, err := protocol.CommandHash([]byte(in)); !protocol.IsCode(err, protocol.Validation) {
			t.Errorf("CommandHash(%q) = %v, want validation", in, err)
		}
	}
}

func TestCommandHash(t *testing.T) {
	t.Parallel()
	sum := sha256.Sum256([]byte(rfcCanonical))
	h, err := protocol.CommandHash([]byte(rfcSample))
	if err != nil {
		t.Fatal(err)
	}
	if h != hex.EncodeToString(sum[:]) {
		t.Fatalf("CommandHash(sample) = %s, want sha256 of the canonical form %x", h, sum)
	}
	// Spelling does not change the hash; content does.
	a, _ := protocol.CommandHash([]byte(`{"playbook":"audit","input":{"repo":"x","depth":1.0}}`))
	b, _ := protocol.CommandHash([]byte("{ \"input\" : { \"depth\":1, \"repo\":\"\\u0078\" },\n \"playbook\":\"audit\" }"))
	c, _ := protocol.CommandHash([]byte(`{"playbook":"audit","input":{"repo":"y","depth":1}}`))
	if a != b || a == c || len(a) != 64 {
		t.Fatalf("hashes %s %s %s", a, b, c)
	}
}

// TestProposalHashBindsTheProposal: the same command in two proposals has
// two hashes; the hash is the canonical {"command", "proposalId"} object's,
// whatever the command's key order, and recomputable by a client.
func TestProposalHashBindsTheProposal(t *testing.T) {
	t.Parallel()
	cmd := []byte(`{"schedule":"nightly","enabled":true}`)
	a, err := protocol.ProposalHash(cmd, "p1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := protocol.ProposalHash(cmd, "p2")
	same, _ := protocol.ProposalHash([]byte(`{"enabled":true,"schedule":"nightly"}`), "p1")
	want, _ := protocol.CommandHash([]byte(`{"proposalId":"p1","command":{"enabled":true,"schedule":"nightly"}}`))
	if a == b || a != same || a != want {
		t.Fatalf("hashes: p1 %s, p2 %s, p1 reordered %s, by hand %s", a, b, same, want)
	}
}
