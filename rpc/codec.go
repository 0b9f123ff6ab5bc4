package rpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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

	// v0 is set when the message used the legacy capitalised framing; the
	// reply is written in the same form.
	v0 bool
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
// field of the wrong type is errBadMessage.
func decodeHeader(data []byte) (header, error) {
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

// encodeReply frames the reply to request h: body (already JSON) on
// success, or err's message, code and info. It returns the bytes of one
// websocket text message, ending in a newline as Juju's WriteJSON does.
func encodeReply(h *header, body json.RawMessage, err error) ([]byte, error) {
	if len(body) == 0 || err != nil {
		body = emptyBody
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
		out, merr = json.Marshal(replyV1{RequestID: h.RequestID, Error: msg, ErrorCode: code, ErrorInfo: info, Response: body})
	}
	if merr != nil {
		return nil, merr
	}
	return append(out, '\n'), nil
}
