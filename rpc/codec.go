package rpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/provisiond/provisiond/internal/jsonscan"
)

// header is one incoming message, V1 or V0. Keys are matched without
// regard to case by encoding/json, as Juju's decoder does: "Id", "ID" and
// "id" all fill ID. Params stays raw until the method decodes it.
type header struct {
	RequestID uint64          `json:"request-id"`
	Type      string          `json:"type"`
	Version   int             `json:"version"`
	ID        string          `json:"id"`
	Request   string          `json:"request"`
	Params    json.RawMessage `json:"params"`
	// FromRevision is provisiond's own header key, which only its own
	// clients send (revisions.go): present, the reply carries the
	// revision its watcher's event covers.
	FromRevision *uint64 `json:"from-revision"`

	// v0 is set when the message used the legacy capitalised framing; the
	// reply is written in the same form.
	v0 bool
	// replied is set (atomically) by the first reply of a Later call
	// (header.firstReply).
	replied uint32

	// Set by the connection for a call it runs: the message's size and
	// the call's context (limits.go).
	size   int64
	cc     callCtx
	caller Caller    // what runs it
	lc     laterCall // a Later call's, from its start (Conn.await)
}

// request is what routes h's call.
func (h *header) request() Request {
	return Request{RequestID: h.RequestID, Facade: h.Type, Version: h.Version, ID: h.ID, Method: h.Request}
}

// headerV0 is the legacy framing: Go field names, matched without case.
type headerV0 struct {
	RequestId uint64
	Type      string
	Version   int
	Id        string
	Request   string
	Params    json.RawMessage
}

// errBadMessage reports a message that cannot be framed: the connection is
// closed without a reply (specs/rpc.md §1.6).
var errBadMessage = errors.New("malformed message")

// decodeHeader reads the first JSON value of data as a request header. As in
// Juju, the V1 form is tried first and a zero request-id means V0. Anything
// after the first value is ignored. Invalid JSON, a non-object or a header
// field of the wrong type is errBadMessage. The header's Params is a copy.
//
// Messages in the form our clients send (see decodeHeaderFast) are decoded
// without encoding/json; everything else goes through decodeHeaderJSON,
// which defines the behaviour.
func decodeHeader(data []byte) (header, error) {
	if h, ok := decodeHeaderFast(bytes.TrimSpace(data)); ok {
		return h, nil
	}
	return decodeHeaderJSON(data)
}

// decodeHeaderJSON is decodeHeader through encoding/json: the definition
// decodeHeaderFast must agree with.
func decodeHeaderJSON(data []byte) (header, error) {
	var h header
	if err := decodeFirst(data, &h); err != nil {
		return header{}, fmt.Errorf("%w: %v", errBadMessage, err)
	}
	if h.RequestID != 0 {
		return h, nil
	}
	var h0 headerV0
	if err := decodeFirst(data, &h0); err != nil {
		return header{}, fmt.Errorf("%w: %v", errBadMessage, err)
	}
	return header{
		RequestID: h0.RequestId,
		Type:      h0.Type,
		Version:   h0.Version,
		ID:        h0.Id,
		Request:   h0.Request,
		Params:    h0.Params,
		v0:        true,
	}, nil
}

func decodeFirst(data []byte, v any) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return errors.New("empty message")
	}
	if trimmed[0] != '{' {
		return errors.New("message is not a JSON object")
	}
	return json.NewDecoder(bytes.NewReader(trimmed)).Decode(v)
}

// decodeHeaderFast decodes the usual V1 header without reflection: one
// object whose keys are among request-id, type, version, id, request and
// params, spelled so, each at most once; request-id a positive integer and
// version a non-negative one, written as plain digits; the strings plain
// printable ASCII without escapes; params any valid JSON value. JSON
// whitespace may surround the tokens and anything may follow the object.
// That is what the Go client, Juju's agents and python-libjuju send. For
// anything else (other keys or spellings such as "Id", escapes, request-id
// 0, a number in another form, invalid JSON) it reports false and leaves
// the message to decodeHeaderJSON; whatever it accepts, decodeHeaderJSON
// decodes to the same header (FuzzDecodeHeader checks).
func decodeHeaderFast(data []byte) (h header, ok bool) {
	const (
		seenRequestID = 1 << iota
		seenType
		seenVersion
		seenID
		seenRequest
		seenParams
	)
	i := jsonscan.SkipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return header{}, false
	}
	var seen int
	for i = jsonscan.SkipSpace(data, i+1); ; {
		key, j, ok := jsonscan.PlainString(data, i)
		if !ok {
			return header{}, false
		}
		i = jsonscan.SkipSpace(data, j)
		if i >= len(data) || data[i] != ':' {
			return header{}, false
		}
		i = jsonscan.SkipSpace(data, i+1)
		var bit int
		switch string(key) {
		case "request-id":
			bit = seenRequestID
			h.RequestID, j, ok = jsonscan.PlainUint(data, i)
		case "type":
			bit = seenType
			h.Type, j, ok = plainStringValue(data, i)
		case "version":
			bit = seenVersion
			var v uint64
			v, j, ok = jsonscan.PlainUint(data, i)
			ok = ok && v <= maxVersion
			h.Version = int(v)
		case "id":
			bit = seenID
			h.ID, j, ok = plainStringValue(data, i)
		case "request":
			bit = seenRequest
			h.Request, j, ok = plainStringValue(data, i)
		case "params":
			bit = seenParams
			if j, ok = jsonscan.ValueEnd(data, i); ok && json.Valid(data[i:j]) {
				// A copy, as encoding/json makes: a call may outlive the
				// message by long (a watcher's Next), and holding the
				// params must not hold the whole read buffer.
				h.Params = bytes.Clone(data[i:j])
			} else {
				ok = false
			}
		}
		if bit == 0 || !ok || seen&bit != 0 {
			return header{}, false
		}
		seen |= bit
		i = jsonscan.SkipSpace(data, j)
		if i >= len(data) {
			return header{}, false
		}
		if data[i] == '}' {
			break
		}
		if data[i] != ',' {
			return header{}, false
		}
		i = jsonscan.SkipSpace(data, i+1)
	}
	if h.RequestID == 0 {
		return header{}, false // V0, or no request-id at all
	}
	return h, true
}

// maxVersion bounds the versions decodeHeaderFast takes: any int would do,
// facade versions are small.
const maxVersion = 1<<31 - 1

func plainStringValue(data []byte, i int) (string, int, bool) {
	s, j, ok := jsonscan.PlainString(data, i)
	if m := interned.Load(); m != nil {
		if name, found := (*m)[string(s)]; found { // no allocation for the lookup
			return name, j, ok
		}
	}
	return string(s), j, ok
}

// interned holds the names of every registered facade and method, each
// its own key and value: a request's "type" and "request" that name them
// (nearly all do) decode to these strings instead of new ones, two
// allocations fewer per call. It is replaced whole, never modified, so
// decoders read it without a lock.
var interned atomic.Pointer[map[string]string]

// internMu serialises internNames.
var internMu sync.Mutex

// internNames adds names to interned (Register, once per facade version).
func internNames(names []string) {
	internMu.Lock()
	defer internMu.Unlock()
	next := map[string]string{}
	if m := interned.Load(); m != nil {
		maps.Copy(next, *m)
	}
	for _, n := range names {
		next[n] = n
	}
	interned.Store(&next)
}

// isRequest says whether h is a request. Anything else is taken as a reply
// to a server-side call, which this server never makes, and is dropped.
func (h *header) isRequest() bool { return h.Type != "" || h.Request != "" }

// emptyBody is what goes in "response" for methods without a result and for
// every error reply: python-libjuju reads result['response'] unconditionally.
var emptyBody = json.RawMessage(`{}`)

type replyV1 struct {
	RequestID uint64          `json:"request-id"`
	Error     string          `json:"error,omitempty"`
	ErrorCode string          `json:"error-code,omitempty"`
	ErrorInfo map[string]any  `json:"error-info,omitempty"`
	Response  json.RawMessage `json:"response"`
	// Revision answers a request with "from-revision" (revisions.go).
	Revision uint64 `json:"revision,omitempty"`
}

type replyV0 struct {
	RequestId uint64
	Error     string          `json:",omitempty"`
	ErrorCode string          `json:",omitempty"`
	Response  json.RawMessage `json:",omitempty"`
}

// coder is implemented by errors that carry a Juju error code.
type coder interface{ ErrorCode() string }

// infoer is implemented by errors that carry Juju error info.
type infoer interface{ ErrorInfo() map[string]any }

// appendReplyStart appends what comes before the response of a V1 reply
// without error (encodeReply) to request id.
func appendReplyStart(out []byte, id uint64) []byte {
	out = append(out, `{"request-id":`...)
	out = strconv.AppendUint(out, id, 10)
	return append(out, `,"response":`...)
}

// appendReplyEnd appends what comes after the response of a V1 reply
// without error: its revision, if not 0, and the end of the frame.
func appendReplyEnd(out []byte, rev uint64) []byte {
	if rev > 0 {
		out = append(out, `,"revision":`...)
		out = strconv.AppendUint(out, rev, 10)
	}
	return append(out, "}\n"...)
}

// encodeReply frames the reply to request h: body on success, or err's
// message, code and info. body must be what json.Marshal makes (compact,
// HTML-escaped JSON), as Conn.reply passes it. It returns the bytes of one
// websocket text message, ending in a newline as Juju's WriteJSON does.
func encodeReply(h *header, body json.RawMessage, err error) ([]byte, error) {
	if len(body) == 0 || err != nil {
		body = emptyBody
	}
	rev := h.cc.revision()
	if err == nil && !h.v0 {
		// What json.Marshal(replyV1{RequestID, Response: body}) makes, without
		// reflection or a second pass over body: marshalling a RawMessage
		// compacts and escapes it, which json.Marshal's output already is.
		out := make([]byte, 0, len(`{"request-id":,"response":}`)+20+len(body)+2)
		out = appendReplyStart(out, h.RequestID)
		out = append(out, body...)
		return appendReplyEnd(out, rev), nil
	}
	var msg string
	var code string
	var info map[string]any
	if err != nil {
		msg = err.Error()
		var c coder
		if errors.As(err, &c) {
			code = c.ErrorCode()
		}
		var i infoer
		if errors.As(err, &i) {
			info = i.ErrorInfo()
		}
	}
	var out []byte
	var merr error
	if h.v0 {
		out, merr = json.Marshal(replyV0{RequestId: h.RequestID, Error: msg, ErrorCode: code, Response: body})
	} else {
		out, merr = json.Marshal(replyV1{RequestID: h.RequestID, Error: msg, ErrorCode: code, ErrorInfo: info, Response: body, Revision: rev})
	}
	if merr != nil {
		return nil, merr
	}
	return append(out, '\n'), nil
}
