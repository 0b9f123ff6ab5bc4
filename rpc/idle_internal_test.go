package rpc

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// frame is a websocket frame for the tracker's tests.
type frame struct {
	op      byte // opcode
	fin     bool
	masked  bool
	payload int
}

func (f frame) bytes() []byte {
	b0 := f.op
	if f.fin {
		b0 |= 0x80
	}
	var mask byte
	if f.masked {
		mask = 0x80
	}
	var b []byte
	switch {
	case f.payload < 126:
		b = []byte{b0, mask | byte(f.payload)}
	case f.payload <= 0xffff:
		b = []byte{b0, mask | 126, 0, 0}
		binary.BigEndian.PutUint16(b[2:], uint16(f.payload))
	default:
		b = make([]byte, 10)
		b[0], b[1] = b0, mask|127
		binary.BigEndian.PutUint64(b[2:], uint64(f.payload))
	}
	if f.masked {
		b = append(b, 1, 2, 3, 4)
	}
	return append(b, make([]byte, f.payload)...)
}

// TestFrameTracker feeds streams of frames in random pieces and checks,
// after every piece, what the tracker says against what the pieces end
// on: the end of a whole data message, or anything else.
func TestFrameTracker(t *testing.T) {
	streams := [][]frame{
		{{op: 1, fin: true, masked: true, payload: 10}},
		{{op: 1, fin: true, masked: true, payload: 0}},
		{{op: 2, fin: true, payload: 125}, {op: 1, fin: true, payload: 126}},
		{{op: 1, fin: true, masked: true, payload: 70000}},
		// A fragmented message with control frames between its fragments.
		{{op: 1, masked: true, payload: 300}, {op: 9, fin: true, masked: true, payload: 4},
			{op: 0, masked: true, payload: 0}, {op: 10, fin: true, masked: true, payload: 0},
			{op: 0, fin: true, masked: true, payload: 65535}},
		// Control frames alone end no message.
		{{op: 10, fin: true, masked: true, payload: 8}, {op: 1, fin: true, masked: true, payload: 3},
			{op: 10, fin: true, masked: true, payload: 0}},
		{{op: 8, fin: true, masked: true, payload: 2}},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for si, frames := range streams {
		for round := 0; round < 50; round++ {
			var stream []byte
			var ends []int          // offsets where a whole data message ends
			atEnd := map[int]bool{} // those not followed by a control frame
			for _, f := range frames {
				stream = append(stream, f.bytes()...)
				if f.fin && f.op < 8 {
					ends = append(ends, len(stream))
					atEnd[len(stream)] = true
				}
			}
			var tr frameTracker
			messages := uint64(0)
			for off := 0; off < len(stream); {
				n := 1 + r.IntN(min(len(stream)-off, 1+r.IntN(400)))
				if round == 0 && len(stream) < 1000 {
					n = 1 // byte by byte once
				}
				tr.feed(stream[off : off+n])
				off += n
				for len(ends) > 0 && ends[0] <= off {
					messages++
					ends = ends[1:]
				}
				// Drained only right at the end of a data message, with no
				// bytes (not even a control frame) after it.
				if got := tr.drained(messages); got != atEnd[off] {
					t.Fatalf("stream %d round %d: after %d of %d bytes drained %v, want %v (messages %d, tracker %d)",
						si, round, off, len(stream), got, atEnd[off], messages, tr.messages)
				}
				if tr.messages != messages {
					t.Fatalf("stream %d: after %d bytes tracker counts %d messages, want %d", si, off, tr.messages, messages)
				}
			}
		}
	}
}
