"""protoc-gen-grpc_python: grpcio-tools' gRPC Python generator as a protoc plugin.

buf runs protoc's built-in generators (python, pyi) through the protoc named by
a plugin's protoc_path, but only those it knows by name, and grpc_python is not
one of them: grpcio-tools compiles it into its own protoc rather than shipping a
protoc-gen-grpc_python binary. This plugin bridges the two. It reads buf's
CodeGeneratorRequest on stdin, hands the request's descriptors to grpcio-tools'
protoc with --grpc_python_out, and answers with the files that protoc wrote,
so the gRPC stubs come from the grpcio-tools version pinned in
sdk/python/requirements-dev.txt, in step with the grpcio runtime.

buf.gen.yaml runs it with the project's virtualenv:

    - local: [.venv/bin/python, hack/protoc_gen_grpc_python.py]
      out: sdk/python/src
"""

import pathlib
import sys
import tempfile

from google.protobuf import descriptor_pb2
from google.protobuf.compiler import plugin_pb2
from grpc_tools import protoc


def generate(request: plugin_pb2.CodeGeneratorRequest) -> plugin_pb2.CodeGeneratorResponse:
    response = plugin_pb2.CodeGeneratorResponse(
        supported_features=plugin_pb2.CodeGeneratorResponse.FEATURE_PROTO3_OPTIONAL,
    )
    with tempfile.TemporaryDirectory(prefix="protoc-gen-grpc_python-") as tmp:
        descriptors = pathlib.Path(tmp, "descriptors.binpb")
        descriptors.write_bytes(descriptor_pb2.FileDescriptorSet(file=request.proto_file).SerializeToString())
        out = pathlib.Path(tmp, "out")
        out.mkdir()
        # protoc's --X_out takes options before a colon: "opt1,opt2:dir".
        options = f"{request.parameter}:" if request.parameter else ""
        code = protoc.main([
            "protoc",
            f"--descriptor_set_in={descriptors}",
            f"--grpc_python_out={options}{out}",
            *request.file_to_generate,
        ])
        if code != 0:
            response.error = f"grpcio-tools' protoc exited with status {code}"
            return response
        for path in sorted(p for p in out.rglob("*") if p.is_file()):
            response.file.add(name=path.relative_to(out).as_posix(), content=path.read_text(encoding="utf-8"))
    return response


def main() -> None:
    request = plugin_pb2.CodeGeneratorRequest.FromString(sys.stdin.buffer.read())
    sys.stdout.buffer.write(generate(request).SerializeToString())


if __name__ == "__main__":
    main()
