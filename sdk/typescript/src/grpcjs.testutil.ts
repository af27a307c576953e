// A gRPC client from @grpc/grpc-js, an implementation independent of the
// Connect server under test, for the tests that go over a real socket.
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
  ): Promise<MessageShape<O>> {
    return new Promise((resolve, reject) => {
      this.client.makeUnaryRequest(
        `/${service.typeName}/${method}`,
        (m: MessageShape<I>) => Buffer.from(toBinary(input, m)),
        (b: Buffer) => fromBinary(output, b),
        create(input, init),
        new grpc.Metadata(),
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

  close(): void {
    this.client.close();
  }
}

export const status = grpc.status;
export type ServiceError = grpc.ServiceError;
