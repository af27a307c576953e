// A kind declared with @polyop/sidecar/crd, one field per supported marker:
// polyop-crd writes its CRD, which the test applies to a real API server.
// (Plain JavaScript, as tsc would emit it from a TypeScript module.)
import { Type } from "@sinclair/typebox";
import { defineKind, Kube } from "@polyop/sidecar/crd";

const Color = { Red: "red", Blue: "blue" };

export const WidgetSpec = Type.Object(
  {
    replicas: Type.Integer({ format: "int32", minimum: 0, maximum: 10, default: 1, description: "How many widgets." }),
    color: Type.Optional(Type.Enum(Color)),
    mode: Type.Optional(Type.Union([Type.Literal("fast"), Type.Literal("safe")], { default: "safe" })),
    ratio: Type.Optional(Type.Number({ exclusiveMinimum: 0, exclusiveMaximum: 1 })),
    step: Type.Optional(Type.Integer({ multipleOf: 5 })),
    owner: Type.Optional(Type.String({ minLength: 1, maxLength: 20, pattern: "^[a-z]+$" })),
    contact: Type.Optional(Type.String({ format: "email" })),
    since: Type.Optional(Type.String({ format: "date-time" })),
    size: Type.Optional(Type.Integer({ format: "int64" })),
    tags: Type.Optional(Kube.SetList(Type.String(), { maxItems: 3 })),
    ports: Type.Optional(Kube.MapList(Type.Object({ name: Type.String(), port: Type.Integer({ minimum: 1, maximum: 65535 }) }), ["name"], { minItems: 1 })),
    labels: Type.Optional(Type.Record(Type.String(), Type.String())),
    extra: Type.Optional(Kube.PreserveUnknownFields()),
    anything: Type.Optional(Kube.Any()),
    template: Type.Optional(Kube.EmbeddedResource()),
    maxUnavailable: Type.Optional(Kube.IntOrString()),
    note: Type.Optional(Kube.Nullable(Type.String())),
    min: Type.Optional(Type.Integer()),
    max: Type.Optional(Type.Integer()),
  },
  { "x-kubernetes-validations": [{ rule: "!has(self.min) || !has(self.max) || self.min <= self.max", message: "min must not exceed max" }] },
);

export const Widget = defineKind({
  group: "crdgen.polyop.dev",
  version: "v1",
  kind: "Widget",
  shortNames: ["wdg"],
  categories: ["polyop"],
  description: "A widget, to test the CRDs polyop-crd writes.",
  metadata: { name: Type.String({ maxLength: 30 }) },
  spec: WidgetSpec,
  status: Kube.Status({ replicas: Type.Optional(Type.Integer({ format: "int32" })), selector: Type.Optional(Type.String()) }),
  printerColumns: [
    { name: "Replicas", type: "integer", jsonPath: ".spec.replicas" },
    { name: "Color", type: "string", jsonPath: ".spec.color", priority: 1 },
    { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
  ],
  selectableFields: [".spec.color"],
  subresources: { scale: { specReplicasPath: ".spec.replicas", statusReplicasPath: ".status.replicas", labelSelectorPath: ".status.selector" } },
});

// An older version, served and deprecated; v1 is stored.
export const WidgetV1alpha1 = defineKind({
  group: "crdgen.polyop.dev",
  version: "v1alpha1",
  kind: "Widget",
  storage: false,
  deprecated: true,
  deprecationWarning: "crdgen.polyop.dev/v1alpha1 Widget is deprecated; use crdgen.polyop.dev/v1",
  spec: Type.Object({ replicas: Type.Optional(Type.Integer()) }),
});

// A cluster-scoped kind with an optional spec.
export const Gadget = defineKind({
  group: "crdgen.polyop.dev",
  version: "v1",
  kind: "Gadget",
  scope: "Cluster",
  spec: Type.Optional(Type.Object({ enabled: Type.Boolean({ default: true }) })),
});
