package webhookreceiver

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// limitBodyTime gives the rest of the body BodyReadTimeout from now. It is
// called at the body's first byte, which is when the request takes a slot:
// ReadTimeout alone counts from the request's start, so a client that sends
// one byte early holds its slot for nearly all of it.
//
// The new deadline never comes later than the one net/http set from
// ReadTimeout: the body deadline shortens a request, it never lengthens it.
// That deadline is known when the connection came from Start's listener
// (readDeadlineConn); a Handler served by someone else gets its own server's
// deadline replaced by now+BodyReadTimeout.
func (s *Server) limitBodyTime(w http.ResponseWriter, r *http.Request) error {
	d := time.Now().Add(s.opts.BodyReadTimeout)
	if c, ok := r.Context().Value(connKey{}).(*readDeadlineConn); ok {
		// Start always sets ReadTimeout, so no deadline means net/http has
		// cleared it: the body (of one byte) is complete and it is
		// watching the connection for the next request.
		if cur := c.readDeadline(); cur.IsZero() || cur.Before(d) {
			return nil
		}
	}
	return http.NewResponseController(w).SetReadDeadline(d)
}

// connKey is the request-context key of the request's *readDeadlineConn.
type connKey struct{}

// deadlineListener hands out connections that remember their read deadline.
type deadlineListener struct{ net.Listener }

func (l deadlineListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &readDeadlineConn{Conn: c}, nil
}

// withConn is http.Server's ConnContext: it makes the connection findable
// from its requests.
func withConn(ctx context.Context, c net.Conn) context.Context {
	if dc, ok := c.(*readDeadlineConn); ok {
		return context.WithValue(ctx, connKey{}, dc)
	}
	return ctx
}

// readDeadlineConn remembers the last read deadline set on it: net/http sets
// one from ReadTimeout for each request and offers no way to read it back.
type readDeadlineConn struct {
	net.Conn
	deadline atomic.Int64 // UnixNano; 0 for none
}

func (c *readDeadlineConn) SetReadDeadline(t time.Time) error {
	c.remember(t)
	return c.Conn.SetReadDeadline(t)
}

func (c *readDeadlineConn) SetDeadline(t time.Time) error {
	c.remember(t)
	return c.Conn.SetDeadline(t)
}

// CloseWrite keeps what net/http does with a TCP connection it closes after
// an answer (a shed request's unread body): half-close, so the client reads
// the answer before the connection goes.
func (c *readDeadlineConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *readDeadlineConn) remember(t time.Time) {
	var n int64
	if !t.IsZero() {
		n = t.UnixNano()
	}
	c.deadline.Store(n)
}

func (c *readDeadlineConn) readDeadline() time.Time {
	if n := c.deadline.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}
