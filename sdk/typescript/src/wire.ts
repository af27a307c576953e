import { fromBinary } from "@bufbuild/protobuf";
import type { Duration } from "@bufbuild/protobuf/wkt";

import {
  FinalizeRequestSchema,
  ReconcileRequestSchema,
  ReconcileStreamRequestSchema,
  type CacheVersion,
  type ReconcileRequest,
  type ReconcileStreamRequest,
} from "./gen/polyop/v1alpha1/reconcile_pb.js";
import type { GroupVersionKind, ObjectKey } from "./gen/polyop/v1alpha1/types_pb.js";

// Decoders of ReconcileRequest and ReconcileStreamRequest written out field
// by field: every reconcile decodes one, and protobuf-es's fromBinary, which
// walks the message's schema by reflection for each field, spends on this
// small message about as long as JSON.parse spends on the 4 KB object inside
// it. Anything the decoder does
// not know (a field of a newer protocol, an unexpected wire type) hands the
// whole message to fromBinary instead, so that nothing is lost; wire.test.ts
// holds the fields it knows to the schema's.

/** The field numbers the decoders know, by message; wire.test.ts compares them with the schemas. */
export const knownFields = {
  "polyop.v1alpha1.ReconcileStreamRequest": [1, 2, 3, 4, 5],
  "google.protobuf.Duration": [1, 2],
  "polyop.v1alpha1.ReconcileRequest": [1, 2, 3, 4, 5, 6, 7],
  "polyop.v1alpha1.GroupVersionKind": [1, 2, 3],
  "polyop.v1alpha1.ObjectKey": [1, 2],
  "polyop.v1alpha1.CacheVersion": [1, 2],
} as const;

/** Thrown inside a decoder to hand the message to fromBinary (made once: a throw then captures no stack). */
const unknown = new Error("a field the decoder does not know");

/** Strings must be valid UTF-8, as protobuf-es (and every proto3 runtime) checks. */
const utf8 = new TextDecoder("utf-8", { fatal: true });

const VARINT = 0;
const LEN = 2;

/** Reads protobuf's wire format from bytes[pos, end). */
class Reader {
  constructor(
    readonly bytes: Uint8Array,
    public pos: number,
    readonly end: number,
  ) {}

  /**
   * A Reader of all of bytes, through a plain Uint8Array over its memory:
   * grpc-js hands a Buffer, whose subarray costs several times a
   * Uint8Array's.
   */
  static of(bytes: Uint8Array): Reader {
    return new Reader(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength), 0, bytes.byteLength);
  }

  /** A varint's low 32 bits as a signed number (an int32's value); longer varints are read to their end. */
  varint(): number {
    const b = this.bytes;
    let result = 0;
    for (let shift = 0; shift < 70; shift += 7) {
      if (this.pos >= this.end) {
        throw new Error("premature end of a varint");
      }
      const byte = b[this.pos++]!;
      if (shift < 32) {
        result |= (byte & 0x7f) << shift;
      }
      if (byte < 0x80) {
        return result | 0;
      }
    }
    throw new Error("a varint longer than 10 bytes");
  }

  /**
   * A varint as an unsigned 64-bit integer. Those beyond 2^53 (no id or
   * timeout the host sends) are left to fromBinary.
   */
  uint64(): bigint {
    const b = this.bytes;
    let result = 0;
    for (let shift = 0; shift < 53; shift += 7) {
      if (this.pos >= this.end) {
        throw new Error("premature end of a varint");
      }
      const byte = b[this.pos++]!;
      result += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) {
        return BigInt(result);
      }
    }
    throw unknown;
  }

  /** The next tag: field number << 3 | wire type. */
  tag(): number {
    return this.varint() >>> 0;
  }

  /** A length-delimited field's bytes, a view of the input's memory (as fromBinary's, but a Uint8Array). */
  lengthDelimited(): Uint8Array {
    const len = this.varint() >>> 0;
    const end = this.pos + len;
    if (end > this.end) {
      throw new Error("premature end of a length-delimited field");
    }
    const view = this.bytes.subarray(this.pos, end);
    this.pos = end;
    return view;
  }

  /**
   * A string field. TextDecoder is as fast as building a short ASCII string
   * char by char, and faster once the string is used: such a string is a chain
   * of one-char pieces that V8 flattens when it compares or hashes it (a map
   * key, a registry lookup), which cost a microsecond for a traceparent.
   */
  string(): string {
    return utf8.decode(this.lengthDelimited());
  }

  /** Decodes the embedded message that comes next with each, field by field: each gets a field's tag. */
  fields(each: (tag: number, r: Reader) => void): void {
    const len = this.varint() >>> 0;
    const end = this.pos + len;
    if (end > this.end) {
      throw new Error("premature end of an embedded message");
    }
    const inner = new Reader(this.bytes, this.pos, end);
    while (inner.pos < end) {
      each(inner.tag(), inner);
    }
    this.pos = end;
  }

  /** Decodes the embedded message that comes next, all of whose fields are length-delimited, with each: each gets a field's number. */
  message(each: (no: number, r: Reader) => void): void {
    this.fields((tag, inner) => {
      if ((tag & 7) !== LEN) {
        throw unknown;
      }
      each(tag >>> 3, inner);
    });
  }
}

function groupVersionKind(r: Reader): GroupVersionKind {
  const gvk: GroupVersionKind = { $typeName: "polyop.v1alpha1.GroupVersionKind", group: "", version: "", kind: "" };
  r.message((no, m) => {
    if (no === 1) gvk.group = m.string();
    else if (no === 2) gvk.version = m.string();
    else if (no === 3) gvk.kind = m.string();
    else throw unknown;
  });
  return gvk;
}

function objectKey(r: Reader): ObjectKey {
  const key: ObjectKey = { $typeName: "polyop.v1alpha1.ObjectKey", namespace: "", name: "" };
  r.message((no, m) => {
    if (no === 1) key.namespace = m.string();
    else if (no === 2) key.name = m.string();
    else throw unknown;
  });
  return key;
}

function cacheVersion(r: Reader): CacheVersion {
  const cv: CacheVersion = { $typeName: "polyop.v1alpha1.CacheVersion", resourceVersion: "" };
  r.message((no, m) => {
    if (no === 1 && !cv.kind) cv.kind = groupVersionKind(m);
    else if (no === 2) cv.resourceVersion = m.string();
    else throw unknown;
  });
  return cv;
}

/**
 * Decodes a ReconcileRequest as fromBinary(ReconcileRequestSchema, bytes)
 * does, to the same message (bytes fields are views of the input's memory, as
 * fromBinary's), about ten times faster; throws where fromBinary throws.
 */
export function decodeReconcileRequest(bytes: Uint8Array): ReconcileRequest {
  try {
    return reconcileRequest(bytes);
  } catch (err) {
    if (err !== unknown) {
      throw err;
    }
    return fromBinary(ReconcileRequestSchema, bytes);
  }
}

/** A ReconcileRequest, or the unknown error for anything fromBinary must decode. */
function reconcileRequest(bytes: Uint8Array): ReconcileRequest {
  const req: ReconcileRequest = {
    $typeName: "polyop.v1alpha1.ReconcileRequest",
    controller: "",
    object: new Uint8Array(0),
    retries: 0,
    observedChildren: [],
    cacheVersions: [],
  };
  const r = Reader.of(bytes);
  while (r.pos < r.end) {
    const tag = r.tag();
    const no = tag >>> 3;
    if (no === 5) {
      if ((tag & 7) !== VARINT) throw unknown;
      req.retries = r.varint();
      continue;
    }
    if ((tag & 7) !== LEN) throw unknown;
    if (no === 1) req.controller = r.string();
    else if (no === 2 && !req.kind) req.kind = groupVersionKind(r);
    else if (no === 3 && !req.key) req.key = objectKey(r);
    else if (no === 4) req.object = r.lengthDelimited();
    else if (no === 6) req.observedChildren.push(r.lengthDelimited());
    else if (no === 7) req.cacheVersions.push(cacheVersion(r));
    else throw unknown; // a field unknown here, or an embedded message repeated, which fromBinary merges
  }
  return req;
}

function duration(r: Reader): Duration {
  const d: Duration = { $typeName: "google.protobuf.Duration", seconds: 0n, nanos: 0 };
  r.fields((tag, m) => {
    if (tag === ((1 << 3) | VARINT)) d.seconds = m.uint64();
    else if (tag === ((2 << 3) | VARINT)) d.nanos = m.varint();
    else throw unknown; // another field, or a negative duration (seconds as a ten-byte varint)
  });
  return d;
}

/** Adds a map<string, string> entry to map. */
function mapEntry(r: Reader, map: Record<string, string>): void {
  let key = "";
  let value = "";
  r.fields((tag, m) => {
    if (tag === ((1 << 3) | LEN)) key = m.string();
    else if (tag === ((2 << 3) | LEN)) value = m.string();
    else throw unknown;
  });
  map[key] = value;
}

/**
 * Decodes a ReconcileStreamRequest as fromBinary(ReconcileStreamRequestSchema,
 * bytes) does, to the same message, its ReconcileRequest decoded as
 * decodeReconcileRequest does (a FinalizeRequest, rarer, by fromBinary);
 * throws where fromBinary throws.
 */
export function decodeReconcileStreamRequest(bytes: Uint8Array): ReconcileStreamRequest {
  const req: ReconcileStreamRequest = {
    $typeName: "polyop.v1alpha1.ReconcileStreamRequest",
    id: 0n,
    call: { case: undefined },
    traceContext: {},
  };
  try {
    const r = Reader.of(bytes);
    while (r.pos < r.end) {
      const tag = r.tag();
      const no = tag >>> 3;
      if (no === 1) {
        if ((tag & 7) !== VARINT) throw unknown;
        req.id = r.uint64();
        continue;
      }
      if ((tag & 7) !== LEN) throw unknown;
      // An embedded message repeated, or the call's other case after one, is merged or replaced by fromBinary.
      if (no === 2 && req.call.case === undefined) req.call = { case: "reconcile", value: reconcileRequest(r.lengthDelimited()) };
      else if (no === 3 && req.call.case === undefined) req.call = { case: "finalize", value: fromBinary(FinalizeRequestSchema, r.lengthDelimited()) };
      else if (no === 4 && !req.timeout) req.timeout = duration(r);
      else if (no === 5) mapEntry(r, req.traceContext);
      else throw unknown;
    }
  } catch (err) {
    if (err !== unknown) {
      throw err;
    }
    return fromBinary(ReconcileStreamRequestSchema, bytes);
  }
  return req;
}
