// Package tlsrecord counts TLS records in a byte stream, for tests that
// check how many records (each one write of the sender's TLS connection)
// a connection carried. It imports nothing of the project's.
//
// A Counter is not safe for concurrent use; its user guards it.
package tlsrecord

// Counter counts the TLS records that start in the bytes given to Add,
// which may split records anywhere.
type Counter struct {
	records int
	hdr     []byte // the current record's header, while it is incomplete
	body    int    // bytes of the current record still to come
}

// Add reads the next bytes of the stream.
func (c *Counter) Add(b []byte) {
	for len(b) > 0 {
		if c.body > 0 {
			n := min(c.body, len(b))
			c.body -= n
			b = b[n:]
			continue
		}
		n := min(5-len(c.hdr), len(b))
		c.hdr = append(c.hdr, b[:n]...)
		b = b[n:]
		if len(c.hdr) == 5 {
			c.records++
			c.body = int(c.hdr[3])<<8 | int(c.hdr[4])
			c.hdr = c.hdr[:0]
		}
	}
}

// Records is the number of records begun so far.
func (c *Counter) Records() int { return c.records }
