package harness

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The client end of a local connection is found in /proc and in the open
// files of the process holding it.
func TestSocketOwnerFindsTheConnectingProcess(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	inode, err := socketInode(c.LocalAddr().String(), ln.Addr().String())
	if err != nil || inode == "" {
		t.Fatalf("no socket from %s to %s in /proc/net/tcp (%v)", c.LocalAddr(), ln.Addr(), err)
	}
	if !holdsSocket(os.Getpid(), inode) {
		t.Errorf("this process does not hold socket %s", inode)
	}
	if got, err := procAddr("127.0.0.1:8080"); err != nil || got != "0100007F:1F90" {
		t.Errorf("procAddr: %q %v", got, err)
	}
}

// Gates: a held request waits and then reaches the target, a dropped one
// never does, a refused one is answered by the recorder; an idempotent
// replay is recorded as one.
func TestRecorderGates(t *testing.T) {
	var reached atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		if r.Header.Get("Idempotency-Key") == "again" {
			w.Header().Set("Idempotent-Replayed", "true")
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer target.Close()
	r, err := NewRecorder(target.URL, false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	post := func(path, key string) int {
		req, _ := http.NewRequest(http.MethodPost, r.URL+path, strings.NewReader("body of "+path))
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	stop := r.Refuse(func(_ *http.Request, body []byte) bool { return strings.Contains(string(body), "refuse-me") }, http.StatusServiceUnavailable)
	if got := post("/refuse-me", "k1"); got != http.StatusServiceUnavailable || reached.Load() != 0 {
		t.Fatalf("refused request: %d, %d reached the target", got, reached.Load())
	}
	stop()
	if got := post("/refuse-me", "k1"); got != http.StatusOK || reached.Load() != 1 {
		t.Fatalf("after the refusal stopped: %d, %d reached", got, reached.Load())
	}
	h := r.Hold(func(req *http.Request, _ []byte) bool { return req.URL.Path == "/hold" }, time.Minute)
	done := make(chan int)
	go func() { done <- post("/hold", "k2") }()
	if !h.WaitCaught(1, 5*time.Second) || reached.Load() != 1 {
		t.Fatalf("hold caught %d, %d reached", h.Caught(), reached.Load())
	}
	h.Release(true)
	if got := <-done; got != http.StatusOK || reached.Load() != 2 {
		t.Fatalf("released request: %d, %d reached", got, reached.Load())
	}
	d := r.Hold(func(req *http.Request, _ []byte) bool { return req.URL.Path == "/drop" }, time.Minute)
	go func() { done <- post("/drop", "k3") }()
	d.WaitCaught(1, 5*time.Second)
	d.Release(false)
	if got := <-done; got != http.StatusBadGateway || reached.Load() != 2 {
		t.Fatalf("dropped request: %d, %d reached", got, reached.Load())
	}
	post("/x", "again")
	calls := r.Calls()
	last := calls[len(calls)-1]
	if len(calls) != 5 || !calls[0].Refused || calls[0].Key != "k1" || !calls[2].Held || !calls[3].Dropped || !last.Replayed {
		t.Errorf("calls %+v", calls)
	}
}
