import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { findCondition, isConditionFalse, isConditionTrue, removeCondition, setCondition, type Condition } from "./conditions.js";

const then = "2020-01-01T00:00:00Z";
const ready = (status: Condition["status"], extra: Partial<Condition> = {}): Condition => ({
  type: "Ready",
  status,
  reason: "R",
  message: "",
  lastTransitionTime: then,
  ...extra,
});

describe("setCondition", () => {
  test("if the condition is absent, then it is added with the current time", () => {
    const status: { conditions?: Condition[] } = {};
    assert.equal(setCondition(status, { type: "Ready", status: "True", reason: "Synced", observedGeneration: 2 }), true);
    const c = findCondition(status, "Ready")!;
    assert.equal(c.status, "True");
    assert.equal(c.message, "");
    assert.equal(c.observedGeneration, 2);
    assert.match(c.lastTransitionTime, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  });

  test("if only the reason changes, then the transition time stays", () => {
    const conditions = [ready("True")];
    assert.equal(setCondition(conditions, { type: "Ready", status: "True", reason: "Other" }), true);
    assert.equal(conditions[0]!.lastTransitionTime, then);
    assert.equal(conditions[0]!.reason, "Other");
  });

  test("if the status changes, then the transition time moves", () => {
    const conditions = [ready("True")];
    assert.equal(setCondition(conditions, { type: "Ready", status: "False", reason: "R" }), true);
    assert.notEqual(conditions[0]!.lastTransitionTime, then);
  });

  test("if nothing changes, then it reports no change", () => {
    const conditions = [ready("True", { observedGeneration: 3 })];
    assert.equal(setCondition(conditions, { type: "Ready", status: "True", reason: "R", observedGeneration: 3 }), false);
    assert.deepEqual(conditions, [ready("True", { observedGeneration: 3 })]);
  });

  test("an explicit transition time is kept", () => {
    const conditions: Condition[] = [];
    setCondition(conditions, { type: "Ready", status: "True", reason: "R", lastTransitionTime: then });
    assert.equal(conditions[0]!.lastTransitionTime, then);
  });
});

test("removeCondition, isConditionTrue and isConditionFalse", () => {
  const status = { conditions: [ready("True"), ready("False", { type: "Degraded" })] };
  assert.equal(isConditionTrue(status, "Ready"), true);
  assert.equal(isConditionFalse(status, "Degraded"), true);
  assert.equal(isConditionTrue(status, "Missing"), false);
  assert.equal(isConditionTrue(undefined, "Ready"), false);
  assert.equal(removeCondition(status, "Ready"), true);
  assert.equal(removeCondition(status, "Ready"), false);
  assert.deepEqual(status.conditions.map((c) => c.type), ["Degraded"]);
});
