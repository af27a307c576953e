import { toBinary, type DescFile, type DescService } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import type * as grpc from "@grpc/grpc-js";
import { ReflectionService } from "@grpc/reflection";

/**
 * Registers gRPC server reflection (v1 and v1alpha) of services on server,
 * so that grpcurl and the like list and call them without the proto files.
 * It describes the services' files and every file they import.
 */
export function addReflection(server: grpc.Server, services: DescService[]) {
  const files = new Map<string, DescFile>();
  const add = (file: DescFile) => {
    if (!files.has(file.name)) {
      files.set(file.name, file);
      file.dependencies.forEach(add);
    }
  };
  services.forEach((s) => add(s.file));
  // @grpc/reflection reads the file descriptors of a proto-loader package
  // definition; these are protobuf-es's, encoded the same way.
  const definition = Object.fromEntries(
    [...files.values()].map((file) => [file.name, { fileDescriptorProtos: [Buffer.from(toBinary(FileDescriptorProtoSchema, file.proto))] }]),
  );
  new ReflectionService(definition as unknown as ConstructorParameters<typeof ReflectionService>[0], { services: services.map((s) => s.typeName) }).addToServer(server);
}
