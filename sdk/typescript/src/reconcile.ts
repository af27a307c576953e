import type { CallContext, MaybePromise } from "./context.js";
import type { KindRef, ObjectOf, TypedKindRef } from "./kinds.js";
import type { GroupVersionKind, KubeResource, Manifest, ObjectKey, Received } from "./objects.js";

// The handlers of controllers: reconcilers, finalizers and deleted handlers,
// what they get beside the object and what they answer.

/**
 * What a reconcile decides. Return nothing for "done, nothing to requeue".
 * A failure is thrown, not returned: TerminalError, TemporaryError, or any
 * other error for the exponential backoff.
 */
export interface Result {
  /** Reconcile again after this many milliseconds (and reset the backoff), as controller-runtime's RequeueAfter. */
  requeueAfter?: number;
  /**
   * The desired children, of the owned kinds: the host applies them with
   * server-side apply and owns them. Any Manifest will do, the typed
   * built-in kinds of kubernetes-models included; a child's namespace
   * defaults to its owner's.
   */
  desiredChildren?: Manifest[];
  /** desiredChildren is the complete set: the host deletes the owned children not in it. */
  childrenComplete?: boolean;
}

/** What a finalize decides. Return nothing when clean-up is done and the finalizer may go. */
export interface FinalizeResult {
  /** Clean-up waits on something: call finalize again after this many milliseconds, keeping the finalizer. */
  requeueAfter?: number;
}

/** The options of ReconcileContext.event. */
export interface EventOptions {
  /** What was done (events.k8s.io/v1 action). Defaults to the reason. */
  action?: string;
}

/** What a reconciler (and a finalizer) gets beside its object. */
export interface ReconcileContext extends CallContext {
  readonly controller: string;
  readonly kind: GroupVersionKind;
  readonly key: ObjectKey;
  /** How many times in a row this object has failed; 0 on a first attempt. */
  readonly retries: number;
  /**
   * The observed children of an owned kind declared with sendObserved: the
   * objects of that kind, from the host's cache, whose controller owner
   * reference points at the reconciled object. A typed kind (a
   * kubernetes-models class such as Deployment, or a defineKind model) types
   * them. Throws for a kind the controller does not own with sendObserved.
   */
  observedChildren<K extends TypedKindRef>(kind: K): Array<Received<ObjectOf<K>>>;
  observedChildren<C extends Manifest = KubeResource>(kind: KindRef): Array<Received<C>>;
  /**
   * Records a Kubernetes Event on the object, through the host, once the call
   * returns: type, reason (CamelCase), message, then the options (action:
   * what was done; defaults to the reason).
   */
  event(type: "Normal" | "Warning", reason: string, message: string, options?: EventOptions): void;
  /** @deprecated Pass the action in the options: event(type, reason, message, { action }). */
  event(type: "Normal" | "Warning", reason: string, message: string, action: string): void;
}

/** Reconciles obj: changes obj.status in place, returns what to do next. */
export type Reconciler<T> = (obj: Received<T>, ctx: ReconcileContext) => MaybePromise<Result | void>;
/** Cleans up before obj, being deleted, loses the controller's finalizer. */
export type Finalizer<T> = (obj: Received<T>, ctx: ReconcileContext) => MaybePromise<FinalizeResult | void>;
/** Reacts to a reconciled object that is gone (no finalizer held it): ctx.key names it. */
export type DeletedHandler = (ctx: ReconcileContext) => MaybePromise<Result | void>;

/** A Result that reconciles again after ms milliseconds. */
export function requeueAfter(ms: number): Result {
  return { requeueAfter: ms };
}

/**
 * A Result declaring children as the complete set of desired children: the
 * host applies them and deletes the owned children not among them.
 */
export function childrenComplete(children: Manifest[], result: Omit<Result, "desiredChildren" | "childrenComplete"> = {}): Result {
  return { ...result, desiredChildren: children, childrenComplete: true };
}
