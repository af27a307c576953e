import { Type, type SchemaOptions, type Static, type TArray, type TObject, type TOptional, type TProperties, type TSchema, type TUnion, type TNull, type TUnsafe, type ArrayOptions, type ObjectOptions } from "@sinclair/typebox";
import type { Condition as ConditionType } from "./conditions.js";
import type { KubeResource } from "./objects.js";

/**
 * Schemas for what Kubernetes has and JSON Schema does not, in TypeBox's
 * style (Kube.X beside Type.X): each gives its static type and the
 * x-kubernetes-* keywords the CRD generator writes, as kubebuilder's markers
 * do in Go.
 */
export const Kube = {
  /**
   * An integer or a string (intstr.IntOrString, +kubebuilder:validation:XIntOrString),
   * for example a port number or name, or "25%".
   */
  IntOrString(options: SchemaOptions = {}): TUnsafe<number | string> {
    return Type.Unsafe<number | string>({ ...options, "x-kubernetes-int-or-string": true, anyOf: [{ type: "integer" }, { type: "string" }] });
  },

  /** T or null (+nullable): the field may be set to null. */
  Nullable<T extends TSchema>(schema: T, options: SchemaOptions = {}): TUnion<[T, TNull]> {
    return Type.Union([schema, Type.Null()], options);
  },

  /**
   * A list whose items are unique scalars, merged as a set by server-side
   * apply (+listType=set).
   */
  SetList<T extends TSchema>(items: T, options: ArrayOptions = {}): TArray<T> {
    return Type.Array(items, { ...options, "x-kubernetes-list-type": "set" });
  },

  /**
   * A list of objects identified by the fields in keys, merged item by item
   * by server-side apply (+listType=map, +listMapKey=...). Each key must be
   * required or have a default.
   */
  MapList<T extends TSchema>(items: T, keys: string[], options: ArrayOptions = {}): TArray<T> {
    return Type.Array(items, { ...options, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": keys });
  },

  /** A list replaced as a whole by server-side apply (+listType=atomic; the default for a CRD). */
  AtomicList<T extends TSchema>(items: T, options: ArrayOptions = {}): TArray<T> {
    return Type.Array(items, { ...options, "x-kubernetes-list-type": "atomic" });
  },

  /**
   * An object whose unknown fields are kept rather than pruned
   * (+kubebuilder:pruning:PreserveUnknownFields), with the known ones in
   * properties.
   */
  PreserveUnknownFields<P extends TProperties = Record<never, never>>(properties?: P, options: ObjectOptions = {}): TObject<P> {
    return Type.Object(properties ?? ({} as P), { ...options, "x-kubernetes-preserve-unknown-fields": true });
  },

  /** Any JSON value, kept as it is (x-kubernetes-preserve-unknown-fields with no type; apiextensionsv1.JSON in Go). */
  Any(options: SchemaOptions = {}): TUnsafe<unknown> {
    return Type.Unsafe<unknown>({ ...options, "x-kubernetes-preserve-unknown-fields": true });
  },

  /**
   * A whole Kubernetes object inside this one, a Pod template for example
   * (+kubebuilder:validation:EmbeddedResource): its apiVersion, kind and
   * metadata are checked as an object's; the rest is kept as written.
   */
  EmbeddedResource(options: SchemaOptions = {}): TUnsafe<Omit<KubeResource, "metadata"> & Partial<Pick<KubeResource, "metadata">> & Record<string, unknown>> {
    return Type.Unsafe({ ...options, type: "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true });
  },

  /** metav1.Condition, with the API server's own validation of each field. */
  Condition(): TUnsafe<ConditionType> {
    return Type.Unsafe<ConditionType>(conditionSchema());
  },

  /** A list of metav1.Condition keyed by type, as kubebuilder's status.conditions. */
  Conditions(options: ArrayOptions = {}): TArray<TUnsafe<ConditionType>> {
    return Kube.MapList(Kube.Condition(), ["type"], { description: "The latest observations of the object's state.", ...options });
  },

  /**
   * A status with observedGeneration and conditions (the kubebuilder
   * scaffold's), plus properties:
   *
   *     status: Kube.Status({ replicas: Type.Optional(Type.Integer()) })
   */
  Status<P extends TProperties = Record<never, never>>(properties?: P, options: ObjectOptions = {}): TObject<StatusProperties & P> {
    return Type.Object({ ...statusProperties(), ...(properties ?? ({} as P)) }, options);
  },
};

/** The properties of Kube.Status before the kind's own. */
export type StatusProperties = {
  observedGeneration: TOptional<ReturnType<typeof Type.Integer>>;
  conditions: TOptional<TArray<TUnsafe<ConditionType>>>;
};

function statusProperties(): StatusProperties {
  return {
    observedGeneration: Type.Optional(
      Type.Integer({ format: "int64", minimum: 0, description: "The metadata.generation the status was last computed for." }),
    ),
    conditions: Type.Optional(Kube.Conditions()),
  };
}

/** The static type of Kube.Status(): observedGeneration and conditions. */
export type StatusBase = Static<TObject<StatusProperties>>;

// metav1.Condition as controller-gen writes it from k8s.io/apimachinery's markers.
function conditionSchema() {
  return {
    type: "object",
    description: "Condition contains details for one aspect of the current state of this API Resource.",
    required: ["lastTransitionTime", "message", "reason", "status", "type"],
    properties: {
      lastTransitionTime: {
        type: "string",
        format: "date-time",
        description: "lastTransitionTime is the last time the condition transitioned from one status to another.",
      },
      message: { type: "string", maxLength: 32768, description: "message is a human readable message indicating details about the transition." },
      observedGeneration: {
        type: "integer",
        format: "int64",
        minimum: 0,
        description: "observedGeneration represents the .metadata.generation that the condition was set based upon.",
      },
      reason: {
        type: "string",
        minLength: 1,
        maxLength: 1024,
        pattern: "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
        description: "reason contains a programmatic identifier indicating the reason for the condition's last transition.",
      },
      status: { type: "string", enum: ["True", "False", "Unknown"], description: "status of the condition, one of True, False, Unknown." },
      type: {
        type: "string",
        maxLength: 316,
        pattern: "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
        description: "type of condition in CamelCase or in foo.example.com/CamelCase.",
      },
    },
  };
}
