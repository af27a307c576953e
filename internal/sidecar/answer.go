package sidecar

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	polyopv1alpha1 "github.com/polyop/polyop/sdk/go/gen/polyop/v1alpha1"
)

// DefaultMaxObjectSize is the largest status, and the largest desired child,
// the host accepts in a ReconcileResponse unless configured otherwise: 3 MiB,
// the API server's limit on a request body (MaxRequestBodyBytes in
// k8s.io/apiserver/pkg/server/config.go, twice etcd's recommended 1.5 MiB
// request size). The API server refuses a write of anything larger, so the
// host refuses it first, without decoding it.
const DefaultMaxObjectSize = 3 << 20

// TooLargeError reports a part of a sidecar's answer (its status, or one of
// its desired children) larger than the host accepts.
type TooLargeError struct {
	// Field is the part: "status" or "desired_children[i]".
	Field string
	// Size is its length in bytes.
	Size int
	// Limit is the largest length accepted, in bytes.
	Limit int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is %d bytes, over the limit of %d bytes (the host's --max-object-size): the API server refuses larger requests, so it must be smaller",
		e.Field, e.Size, e.Limit)
}

// CheckSizes returns a TooLargeError for the status and for each desired
// child of resp longer than limit (joined), or nil. A limit of zero or less
// checks nothing.
func CheckSizes(resp *polyopv1alpha1.ReconcileResponse, limit int) error {
	if limit <= 0 {
		return nil
	}
	var errs []error
	if n := len(resp.GetStatus()); n > limit {
		errs = append(errs, &TooLargeError{Field: "status", Size: n, Limit: limit})
	}
	for i, c := range resp.GetDesiredChildren() {
		if len(c) > limit {
			errs = append(errs, &TooLargeError{Field: fmt.Sprintf("desired_children[%d]", i), Size: len(c), Limit: limit})
		}
	}
	return errors.Join(errs...)
}

// reconcileAnswer is the reply a Reconcile call decodes into through
// answerCodec: the response, with its status and desired children bounded
// by limit. A part longer than limit is skipped, not copied, and recorded in
// tooLarge.
type reconcileAnswer struct {
	resp     *polyopv1alpha1.ReconcileResponse
	limit    int
	tooLarge []error
}

// The field numbers of ReconcileResponse that answerCodec reads itself, from
// the generated descriptor, so that they follow the proto.
var (
	statusField          = reconcileResponseField("status")
	desiredChildrenField = reconcileResponseField("desired_children")
)

func reconcileResponseField(name protoreflect.Name) protowire.Number {
	f := (&polyopv1alpha1.ReconcileResponse{}).ProtoReflect().Descriptor().Fields().ByName(name)
	if f == nil || f.Kind() != protoreflect.BytesKind {
		panic(fmt.Sprintf("polyop.v1alpha1.ReconcileResponse has no bytes field %q", name))
	}
	return f.Number()
}

// answerCodec is gRPC's proto codec, except for a reconcileAnswer: its status
// and desired children are read straight from gRPC's receive buffers into
// slices of their own size, and one over the limit is skipped. The default
// codec would copy the whole message into one buffer, then every field out
// of it: an answer of S bytes would cost 2 S on top of the S gRPC received.
type answerCodec struct{}

var protoCodec = encoding.GetCodecV2("proto")

func (answerCodec) Name() string { return protoCodec.Name() }

func (answerCodec) Marshal(v any) (mem.BufferSlice, error) { return protoCodec.Marshal(v) }

func (answerCodec) Unmarshal(data mem.BufferSlice, v any) error {
	switch a := v.(type) {
	case *reconcileAnswer:
		r := data.Reader()
		defer r.Close()
		return a.decode(r, r.Remaining())
	case *streamAnswer:
		r := data.Reader()
		defer r.Close()
		return a.decode(r)
	}
	return protoCodec.Unmarshal(data, v)
}

// decode reads a ReconcileResponse of size bytes from r. The fields other
// than status and desired_children are small; they are gathered, in order,
// and decoded by the proto package.
func (a *reconcileAnswer) decode(r *mem.Reader, size int) error {
	resp := a.resp
	proto.Reset(resp)
	a.tooLarge = nil
	end := r.Remaining() - size
	var rest []byte
	for r.Remaining() > end {
		start := len(rest)
		var tag uint64
		var err error
		if tag, rest, err = appendVarint(rest, r); err != nil {
			return fmt.Errorf("reading a field tag: %w", err)
		}
		num, typ := protowire.DecodeTag(tag)
		if (num == statusField || num == desiredChildrenField) && typ == protowire.BytesType {
			field := "status"
			if num == desiredChildrenField {
				field = fmt.Sprintf("desired_children[%d]", len(resp.DesiredChildren))
			}
			rest = rest[:start]
			b, err := a.readBytes(r, field, end)
			if err != nil {
				return err
			}
			if num == statusField {
				resp.Status = b
			} else {
				resp.DesiredChildren = append(resp.DesiredChildren, b)
			}
			continue
		}
		if rest, err = appendValue(rest, r, num, typ, 0); err != nil {
			return fmt.Errorf("reading field %d: %w", num, err)
		}
	}
	if r.Remaining() != end {
		return fmt.Errorf("a field runs %d bytes past the end of the ReconcileResponse", end-r.Remaining())
	}
	if len(rest) > 0 {
		return proto.UnmarshalOptions{Merge: true}.Unmarshal(rest, resp)
	}
	return nil
}

// readBytes reads a length-delimited value, which ends before end bytes
// remain in r: into a slice of its own, or, when it is longer than the
// limit, nowhere (it is recorded as too large, and nil returned).
func (a *reconcileAnswer) readBytes(r *mem.Reader, field string, end int) ([]byte, error) {
	n, err := readLength(r, end)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", field, err)
	}
	if a.limit > 0 && n > a.limit {
		a.tooLarge = append(a.tooLarge, &TooLargeError{Field: field, Size: n, Limit: a.limit})
		if _, err := r.Discard(n); err != nil {
			return nil, fmt.Errorf("reading %s: %w", field, err)
		}
		return nil, nil
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("reading %s: %w", field, err)
	}
	return b, nil
}

// readLength reads the length of a length-delimited value and checks that
// the reader holds that many bytes before its last end.
func readLength(r *mem.Reader, end int) (int, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return 0, err
	}
	if n > uint64(r.Remaining()-end) {
		return 0, io.ErrUnexpectedEOF
	}
	return int(n), nil
}

// decode reads a ReconcileStreamResponse from r: its ReconcileResponse, if
// it holds one, as a reconcileAnswer bounded by a.limit.
func (a *streamAnswer) decode(r *mem.Reader) error {
	a.id, a.kind, a.finalize, a.err = 0, 0, nil, nil
	if a.reconcile != nil {
		proto.Reset(a.reconcile.resp)
		a.reconcile.tooLarge = nil
	}
	var skipped []byte
	for r.Remaining() > 0 {
		tag, err := binary.ReadUvarint(r)
		if err != nil {
			return fmt.Errorf("reading a field tag: %w", err)
		}
		num, typ := protowire.DecodeTag(tag)
		switch {
		case num == 1 && typ == protowire.VarintType:
			if a.id, err = binary.ReadUvarint(r); err != nil {
				return fmt.Errorf("reading the id: %w", err)
			}
			continue
		case num == streamReconcileField && typ == protowire.BytesType:
			n, err := readLength(r, 0)
			if err != nil {
				return fmt.Errorf("reading the ReconcileResponse: %w", err)
			}
			if a.reconcile == nil {
				a.reconcile = &reconcileAnswer{resp: &polyopv1alpha1.ReconcileResponse{}, limit: a.limit}
			}
			if err := a.reconcile.decode(r, n); err != nil {
				return err
			}
			a.kind = streamReconcileField
			continue
		case (num == streamFinalizeField || num == streamErrorField) && typ == protowire.BytesType:
			n, err := readLength(r, 0)
			if err != nil {
				return fmt.Errorf("reading field %d: %w", num, err)
			}
			b := make([]byte, n)
			if _, err := io.ReadFull(r, b); err != nil {
				return fmt.Errorf("reading field %d: %w", num, err)
			}
			var m proto.Message
			if num == streamFinalizeField {
				a.finalize = &polyopv1alpha1.FinalizeResponse{}
				m = a.finalize
			} else {
				a.err = &polyopv1alpha1.CallStatus{}
				m = a.err
			}
			if err := proto.Unmarshal(b, m); err != nil {
				return fmt.Errorf("decoding field %d: %w", num, err)
			}
			a.kind = int32(num)
			continue
		}
		// A field this host does not know: skipped.
		if skipped, err = appendValue(skipped[:0], r, num, typ, 0); err != nil {
			return fmt.Errorf("reading field %d: %w", num, err)
		}
	}
	return nil
}

// appendVarint copies a varint from r to out, byte for byte, and decodes it.
func appendVarint(out []byte, r *mem.Reader) (uint64, []byte, error) {
	var v uint64
	for i := 0; ; i++ {
		if i == binary.MaxVarintLen64 {
			return 0, nil, errors.New("varint overflows 64 bits")
		}
		b, err := r.ReadByte()
		if err != nil {
			return 0, nil, io.ErrUnexpectedEOF
		}
		out = append(out, b)
		if i == binary.MaxVarintLen64-1 && b > 1 {
			return 0, nil, errors.New("varint overflows 64 bits")
		}
		v |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			return v, out, nil
		}
	}
}

// appendValue copies the value of field num, of wire type typ, from r to
// out, byte for byte. depth is how many groups hold it.
func appendValue(out []byte, r *mem.Reader, num protowire.Number, typ protowire.Type, depth int) ([]byte, error) {
	var n int
	switch typ {
	case protowire.StartGroupType:
		if depth >= protowire.DefaultRecursionLimit {
			return nil, errors.New("groups nested too deep")
		}
		// A group (proto2's, in unknown fields): its fields, up to its end.
		for {
			tag, o, err := appendVarint(out, r)
			if err != nil {
				return nil, err
			}
			out = o
			n, t := protowire.DecodeTag(tag)
			if t == protowire.EndGroupType {
				if n != num {
					return nil, fmt.Errorf("group %d ends as %d", num, n)
				}
				return out, nil
			}
			if out, err = appendValue(out, r, n, t, depth+1); err != nil {
				return nil, err
			}
		}
	case protowire.VarintType:
		_, out, err := appendVarint(out, r)
		return out, err
	case protowire.Fixed32Type:
		n = 4
	case protowire.Fixed64Type:
		n = 8
	case protowire.BytesType:
		l, o, err := appendVarint(out, r)
		if err != nil {
			return nil, err
		}
		if l > uint64(r.Remaining()) {
			return nil, io.ErrUnexpectedEOF
		}
		out, n = o, int(l)
	default:
		return nil, fmt.Errorf("unexpected wire type %d", typ)
	}
	if n > r.Remaining() {
		return nil, io.ErrUnexpectedEOF
	}
	start := len(out)
	out = slices.Grow(out, n)[:start+n]
	if _, err := io.ReadFull(r, out[start:]); err != nil {
		return nil, err
	}
	return out, nil
}
