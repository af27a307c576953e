// A kind whose schema the API server would refuse: polyop-crd must say which field.
import { Type } from "@sinclair/typebox";
import { defineKind } from "@polyop/sidecar/crd";

export const Broken = defineKind({
  group: "crdgen.polyop.dev",
  version: "v1",
  kind: "Broken",
  spec: Type.Object({ items: Type.Array(Type.Object({ value: Type.Union([Type.String(), Type.Object({ a: Type.String() })]) })) }),
});
