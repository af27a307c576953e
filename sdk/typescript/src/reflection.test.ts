// gRPC server reflection of a serving sidecar, asked by a @grpc/grpc-js client
// the way grpcurl asks: list the services, then the files describing one.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test, type TestContext } from "node:test";

import { fromBinary } from "@bufbuild/protobuf";
import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { FileDescriptorProtoSchema, type FileDescriptorProto } from "@bufbuild/protobuf/wkt";
import * as grpc from "@grpc/grpc-js";

import { discardLogger } from "./log.js";
import type { ServeOptions } from "./serve.js";
import { Sidecar } from "./sidecar.js";

const REFLECTION = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo";

/** What a ServerReflectionResponse answered: services listed, file descriptors, or an error. */
interface Answer {
  services: string[];
  files: FileDescriptorProto[];
  error?: { code: number; message: string };
}

/** The length-delimited and varint fields of a protobuf message. */
function* fields(data: Uint8Array): Generator<[number, Uint8Array | number]> {
  const reader = new BinaryReader(data);
  while (reader.pos < reader.len) {
    const [no, type] = reader.tag();
    if (type === WireType.LengthDelimited) {
      yield [no, reader.bytes()];
    } else if (type === WireType.Varint) {
      yield [no, reader.int32()];
    } else {
      reader.skip(type, no);
    }
  }
}

/**
 * Decodes a grpc.reflection.v1.ServerReflectionResponse: file_descriptor_response
 * (4: file_descriptor_proto 1), list_services_response (6: service 1, name 1),
 * error_response (7: error_code 1, error_message 2).
 */
function decodeAnswer(data: Uint8Array): Answer {
  const answer: Answer = { services: [], files: [] };
  for (const [no, value] of fields(data)) {
    if (!(value instanceof Uint8Array)) {
      continue;
    }
    for (const [inner, v] of fields(value)) {
      if (no === 4 && inner === 1 && v instanceof Uint8Array) {
        answer.files.push(fromBinary(FileDescriptorProtoSchema, v));
      } else if (no === 6 && inner === 1 && v instanceof Uint8Array) {
        const name = [...fields(v)].find(([n]) => n === 1)?.[1];
        answer.services.push(name instanceof Uint8Array ? new TextDecoder().decode(name) : "");
      } else if (no === 7) {
        answer.error ??= { code: 0, message: "" };
        if (inner === 1 && typeof v === "number") {
          answer.error.code = v;
        } else if (inner === 2 && v instanceof Uint8Array) {
          answer.error.message = new TextDecoder().decode(v);
        }
      }
    }
  }
  return answer;
}

/** Asks the reflection service at address one question: list_services (7) or file_containing_symbol (4). */
function ask(address: string, question: { listServices: true } | { fileContainingSymbol: string }): Promise<Answer> {
  const request = new BinaryWriter();
  if ("listServices" in question) {
    request.tag(7, WireType.LengthDelimited).string("*");
  } else {
    request.tag(4, WireType.LengthDelimited).string(question.fileContainingSymbol);
  }
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  return new Promise<Answer>((resolve, reject) => {
    const stream = client.makeBidiStreamRequest(
      REFLECTION,
      (b: Uint8Array) => Buffer.from(b),
      (b: Buffer) => b,
      new grpc.Metadata(),
      { deadline: Date.now() + 5000 },
    );
    stream.on("data", (b: Buffer) => resolve(decodeAnswer(b)));
    stream.on("error", reject);
    stream.write(request.finish());
    stream.end();
  }).finally(() => client.close());
}

async function serve(t: TestContext, address: (dir: string) => string, options: ServeOptions = {}): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "po-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const sidecar = new Sidecar({ name: "widget-operator", logger: discardLogger }).reconciler(
    { for: { apiVersion: "example.com/v1", kind: "Widget" } },
    () => {},
  );
  const server = await sidecar.start({ ...options, address: address(dir) });
  t.after(() => server.stop());
  return server.address.startsWith("tcp://") ? server.address.slice("tcp://".length) : server.address;
}

describe("gRPC server reflection", () => {
  test("on a unix socket, lists the sidecar's services and describes them with every file they import", async (t) => {
    const address = await serve(t, (dir) => `unix://${join(dir, "sidecar.sock")}`);

    const list = await ask(address, { listServices: true });
    assert.deepEqual(list.services.sort(), ["grpc.health.v1.Health", "polyop.v1alpha1.SidecarService"]);

    const described = await ask(address, { fileContainingSymbol: "polyop.v1alpha1.SidecarService" });
    assert.equal(described.error, undefined);
    const sidecarFile = described.files.find((f) => f.service.some((s) => s.name === "SidecarService"));
    assert.ok(sidecarFile, `files: ${described.files.map((f) => f.name).join(", ")}`);
    assert.equal(sidecarFile.package, "polyop.v1alpha1");
    const methods = sidecarFile.service.find((s) => s.name === "SidecarService")?.method.map((m) => m.name);
    assert.deepEqual(methods?.filter((m) => ["Describe", "Reconcile", "Finalize", "Default", "Validate", "Convert"].includes(m)).sort(), [
      "Convert",
      "Default",
      "Describe",
      "Finalize",
      "Reconcile",
      "Validate",
    ]);
    // A client builds descriptors from these files alone: each import is among them.
    const names = new Set(described.files.map((f) => f.name));
    for (const file of described.files) {
      for (const dependency of file.dependency) {
        assert.ok(names.has(dependency), `${file.name} imports ${dependency}, which the answer lacks`);
      }
    }

    const unknown = await ask(address, { fileContainingSymbol: "polyop.v1alpha1.NoSuchService" });
    assert.equal(unknown.error?.code, grpc.status.NOT_FOUND);
  });

  test("is off on TCP unless asked for", async (t) => {
    const address = await serve(t, () => "tcp://127.0.0.1:0");
    await assert.rejects(ask(address, { listServices: true }), (err: grpc.ServiceError) => err.code === grpc.status.UNIMPLEMENTED);

    const asked = await serve(t, () => "tcp://127.0.0.1:0", { reflection: true });
    assert.ok((await ask(asked, { listServices: true })).services.includes("polyop.v1alpha1.SidecarService"));
  });

  test("is off on a unix socket with reflection: false", async (t) => {
    const address = await serve(t, (dir) => `unix://${join(dir, "sidecar.sock")}`, { reflection: false });
    await assert.rejects(ask(address, { listServices: true }), (err: grpc.ServiceError) => err.code === grpc.status.UNIMPLEMENTED);
  });
});
