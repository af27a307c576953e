// A gRPC client and server from @grpc/grpc-js, an implementation independent
// of the Connect code under test, for the tests that go over a real socket.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary, type DescMessage, type DescService, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";

export class GrpcClient {
  readonly client: grpc.Client;

  constructor(address: string) {
    this.client = new grpc.Client(address, grpc.credentials.createInsecure(), {
      "grpc.max_receive_message_length": 64 << 20,
      "grpc.max_send_message_length": 64 << 20,
    });
  }

  unary<I extends DescMessage, O extends DescMessage>(
    service: DescService,
    method: string,
    input: I,
    output: O,
    init: MessageInitShape<I>,
    deadlineMs = 5000,
    headers: Record<string, string> = {},
  ): Promise<MessageShape<O>> {
    const metadata = new grpc.Metadata();
    for (const [key, value] of Object.entries(headers)) {
      metadata.set(key, value);
    }
    return new Promise((resolve, reject) => {
      this.client.makeUnaryRequest(
        `/${service.typeName}/${method}`,
        (m: MessageShape<I>) => Buffer.from(toBinary(input, m)),
        (b: Buffer) => fromBinary(output, b),
        create(input, init),
        metadata,
        { deadline: Date.now() + deadlineMs },
        (err, resp) => (err ? reject(err) : resolve(resp!)),
      );
    });
  }

  serverStream<I extends DescMessage, O extends DescMessage>(
    service: DescService,
    method: string,
    input: I,
    output: O,
    init: MessageInitShape<I>,
  ): grpc.ClientReadableStream<MessageShape<O>> {
    return this.client.makeServerStreamRequest(
      `/${service.typeName}/${method}`,
      (m: MessageShape<I>) => Buffer.from(toBinary(input, m)),
      (b: Buffer) => fromBinary(output, b),
      create(input, init),
    );
  }

  /** Opens a bidirectional stream; its messages may be given as init shapes. */
  bidiStream<I extends DescMessage, O extends DescMessage>(
    service: DescService,
    method: string,
    input: I,
    output: O,
  ): grpc.ClientDuplexStream<MessageInitShape<I>, MessageShape<O>> {
    return this.client.makeBidiStreamRequest(
      `/${service.typeName}/${method}`,
      (m: MessageInitShape<I>) => Buffer.from(toBinary(input, create(input, m))),
      (b: Buffer) => fromBinary(output, b),
    );
  }

  close(): void {
    this.client.close();
  }
}

/**
 * Serves handlers (by the methods' local names, for example "watch") of
 * service with grpc-js on a unix socket in a new temporary directory; the
 * methods without a handler answer UNIMPLEMENTED. Responses may be given as
 * message init shapes.
 */
export async function serveGrpc(
  service: DescService,
  handlers: Record<string, grpc.UntypedHandleCall>,
): Promise<{ address: string; stop(): Promise<void> }> {
  const definition: Record<string, grpc.MethodDefinition<MessageShape<DescMessage>, MessageInitShape<DescMessage>>> = {};
  for (const m of service.methods) {
    const streams = (kind: string) => m.methodKind === kind || m.methodKind === "bidi_streaming";
    definition[m.localName] = {
      path: `/${service.typeName}/${m.name}`,
      requestStream: streams("client_streaming"),
      responseStream: streams("server_streaming"),
      requestSerialize: (v: MessageShape<DescMessage>) => Buffer.from(toBinary(m.input, v)),
      requestDeserialize: (b: Buffer) => fromBinary(m.input, b),
      responseSerialize: (v: MessageInitShape<DescMessage>) => Buffer.from(toBinary(m.output, create(m.output, v))),
      responseDeserialize: (b: Buffer) => fromBinary(m.output, b),
    };
  }
  const server = new grpc.Server();
  server.addService(definition, handlers);
  const dir = await mkdtemp(join(tmpdir(), "po-grpc-"));
  const address = `unix://${join(dir, "grpc.sock")}`;
  await new Promise<void>((resolve, reject) =>
    server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())),
  );
  return {
    address,
    stop: async () => {
      server.forceShutdown();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Serves unary methods of a protobuf-es service with @grpc/grpc-js on
 * address (unix:PATH or HOST:PORT), each handler getting the request and the
 * call's metadata. Resolves to the port bound and a function that stops it.
 */
export async function serveUnary(
  address: string,
  service: DescService,
  handlers: Record<string, (req: never, metadata: grpc.Metadata) => unknown>,
): Promise<{ port: number; stop: () => void }> {
  const server = new grpc.Server();
  const definition: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  const implementation: grpc.UntypedServiceImplementation = {};
  for (const method of service.methods) {
    const handler = handlers[method.localName];
    if (!handler) {
      continue;
    }
    definition[method.localName] = {
      path: `/${service.typeName}/${method.name}`,
      requestStream: false,
      responseStream: false,
      requestSerialize: (m: unknown) => Buffer.from(toBinary(method.input, m as MessageShape<DescMessage>)),
      requestDeserialize: (b: Buffer) => fromBinary(method.input, b),
      responseSerialize: (m: unknown) => Buffer.from(toBinary(method.output, create(method.output, m as MessageInitShape<DescMessage>))),
      responseDeserialize: (b: Buffer) => fromBinary(method.output, b),
    };
    implementation[method.localName] = (call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
      try {
        callback(null, handler(call.request as never, call.metadata));
      } catch (err) {
        callback({ code: grpc.status.INTERNAL, details: String(err) });
      }
    };
  }
  server.addService(definition, implementation);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  return { port, stop: () => server.forceShutdown() };
}

export const status = grpc.status;
export type ServiceError = grpc.ServiceError;
