package bench

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

// TestPublishBatch checks the peer's publishers: one call of the batch API
// carries every due publication, each stamped, and the count taken is the
// replies without an error.
func TestPublishBatch(t *testing.T) {
	t.Parallel()
	var got struct {
		Parallel bool `json:"parallel"`
		Commands []struct {
			Publish struct {
				Channel string `json:"channel"`
				Data    struct {
					T int64  `json:"t"`
					P string `json:"p"`
				} `json:"data"`
			} `json:"publish"`
		} `json:"commands"`
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/batch" {
			http.NotFound(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &got); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		io.WriteString(w, `{"replies":[{"publish":{}},{"error":{"code":102,"message":"unknown channel"}},{"publish":{}}]}`)
	}))
	defer srv.Close()
	c := &centrifugo{base: srv.URL, http: srv.Client()}
	before := time.Now().UnixNano()
	n, err := c.publishBatch(t.Context(), []int{3, 4, 3}, func(i int) string { return "bench-" + strconv.Itoa(i) }, "xx")
	if n != 2 || err == nil {
		t.Fatalf("publishBatch: %d taken, error %v; want 2 and the refused one's error", n, err)
	}
	if !got.Parallel || len(got.Commands) != 3 {
		t.Fatalf("batch %+v: want 3 publications, parallel", got)
	}
	for i, want := range []string{"bench-3", "bench-4", "bench-3"} {
		pub := got.Commands[i].Publish
		if pub.Channel != want || pub.Data.P != "xx" || pub.Data.T < before {
			t.Errorf("publication %d: %+v, want channel %s stamped after %d", i, pub, want, before)
		}
	}
}

// TestSyncLoops checks the disk probes: the bandwidth probe carries
// BandwidthWrite bytes per fsync, both measure something, and the fsync
// loop times its pairs.
func TestSyncLoops(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, err := syncLoop(dir, BandwidthWrite, 50*time.Millisecond)
	if err != nil || st.perSec <= 0 {
		t.Fatalf("syncLoop: %v, %.0f/s", err, st.perSec)
	}
	if r := st.bytesPerSec / st.perSec; r != BandwidthWrite {
		t.Fatalf("bytes per fsync %.0f, want %d", r, BandwidthWrite)
	}
	fs, err := fsyncRate(dir, 20*time.Millisecond)
	if err != nil || fs.perSec <= 0 {
		t.Fatalf("fsyncRate: %v, %.0f/s", err, fs.perSec)
	}
	if !(0 < fs.p50 && fs.p50 <= fs.p99 && fs.p99 <= fs.p999) {
		t.Fatalf("fsync percentiles p50 %v, p99 %v, p999 %v: want 0 < p50 <= p99 <= p999", fs.p50, fs.p99, fs.p999)
	}
}

// TestPublish checks the peer's publishers the fair way: one publication
// per call of the publish API, stamped just before the call, and a refusal
// is an error.
func TestPublish(t *testing.T) {
	t.Parallel()
	var got struct {
		Channel string `json:"channel"`
		Data    struct {
			T int64  `json:"t"`
			P string `json:"p"`
		} `json:"data"`
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/publish" {
			http.NotFound(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &got); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if got.Channel == "refused" {
			io.WriteString(w, `{"error":{"code":102,"message":"unknown channel"}}`)
			return
		}
		io.WriteString(w, `{"result":{}}`)
	}))
	defer srv.Close()
	c := &centrifugo{base: srv.URL, http: srv.Client()}
	before := time.Now().UnixNano()
	if err := c.publish(t.Context(), "bench-7", "xx"); err != nil {
		t.Fatal(err)
	}
	if got.Channel != "bench-7" || got.Data.P != "xx" || got.Data.T < before || got.Data.T > time.Now().UnixNano() {
		t.Fatalf("publication %+v: want channel bench-7 stamped between %d and now", got, before)
	}
	if err := c.publish(t.Context(), "refused", ""); err == nil {
		t.Fatal("a refused publication: no error")
	}
}
