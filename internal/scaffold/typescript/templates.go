package typescript

// The templates of a TypeScript project, rendered by scaffold.Writer with
// [[ ]] delimiters.

const packageJSON = `{
  "name": "[[ .Package ]]",
  "version": "0.1.0",
  "private": true,
  "description": "[[ .Name ]]: a polyop operator's sidecar in TypeScript.",
  "type": "module",
  "main": "dist/main.js",
  "scripts": {
    "build": "tsc -p tsconfig.json",
    "start": "node dist/main.js",
    "test": "tsc -p tsconfig.json && cd dist && node --test",
    "lint": "tsc -p tsconfig.json --noEmit"
  },
  "dependencies": {
    "@polyop/sidecar": "[[ .SDKDependency ]]",
    "@sinclair/typebox": "[[ .TypeBox ]]"
  },
  "devDependencies": {
    "@types/node": "[[ .NodeTypes ]]",
    "typescript": "[[ .TypeScript ]]"
  },
  "engines": {
    "node": ">=20"
  }
}
`

const tsconfigJSON = `{
  // The sidecar compiles from src/ (tests included, as *.test.ts) to dist/,
  // as ES modules that Node.js runs.
  "compilerOptions": {
    "target": "ES2022",
    "lib": ["ES2022"],
    "module": "NodeNext",
    "moduleResolution": "NodeNext",
    "types": ["node"],
    "rootDir": "src",
    "outDir": "dist",
    "sourceMap": true,
    "strict": true,
    "noUncheckedIndexedAccess": true,
    "noImplicitOverride": true,
    "noImplicitReturns": true,
    "noFallthroughCasesInSwitch": true,
    "noUnusedLocals": true,
    "noUnusedParameters": true,
    "verbatimModuleSyntax": true,
    "forceConsistentCasingInFileNames": true,
    // Connect's declarations, which the SDK's testing module reaches, name
    // fetch's HeadersInit, which @types/node 20 does not declare; your own
    // code is checked in full.
    "skipLibCheck": true
  },
  "include": ["src"]
}
`

const mainTS = `// The [[ .Name ]] sidecar. The polyop host calls it over gRPC; polyop run
// and polyop render start it with its address:
//
//   node dist/main.js --address unix:///var/run/polyop/sidecar.sock
import { parseArgs } from "node:util";

import { DEFAULT_ADDRESS, jsonLogger, shutdownSignal, type LogLevel } from "@polyop/sidecar";

import { newSidecar } from "./sidecar.js";

const { values } = parseArgs({
  options: {
    address: { type: "string", default: DEFAULT_ADDRESS },
    "log-level": { type: "string", default: "info" },
  },
});

const level = values["log-level"] as LogLevel;
if (!["debug", "info", "error"].includes(level)) {
  console.error("--log-level must be debug, info or error, not " + JSON.stringify(level));
  process.exit(2);
}

await newSidecar({ logger: jsonLogger({ level, name: "[[ .Name ]]" }) }).serve(values.address, { signal: shutdownSignal() });
`

const sidecarTS = `import { Sidecar, type SidecarOptions } from "@polyop/sidecar";
// +polyop:scaffold:imports

/**
 * The [[ .Name ]] sidecar: its reconcilers, webhooks and conversions. The
 * host learns what it registers through Describe. polyop create api and
 * create webhook add their imports and registrations above the
 * +polyop:scaffold: lines: keep them.
 */
export function newSidecar(options: Partial<SidecarOptions> = {}): Sidecar {
  const sidecar = new Sidecar({ name: "[[ .Name ]]", ...options });
  // +polyop:scaffold:register
  return sidecar;
}
`

const sidecarTestTS = `import assert from "node:assert/strict";
import { test } from "node:test";

import { discardLogger } from "@polyop/sidecar";

import { newSidecar } from "./sidecar.js";

test("the sidecar describes itself to the host by its name", () => {
  const description = newSidecar({ logger: discardLogger }).describe();
  assert.equal(description.name, "[[ .Name ]]");
});
`

const dockerfile = `# The [[ .Name ]] sidecar's image: the compiled sidecar and its production
# dependencies, run by node as a non-root user. package-lock.json comes from
# the first npm install (make setup).
#
#	docker build -t [[ .Name ]]-sidecar:dev .
#
# The base image is pinned to a Node.js release; pass
# --build-arg NODE_IMAGE=node:<version>-bookworm-slim@sha256:<digest> to pin
# its digest too.
ARG NODE_IMAGE=[[ .NodeImage ]]

# The sidecar compiled with tsc, its tests left out.
FROM ${NODE_IMAGE} AS builder
WORKDIR /app
COPY package.json package-lock.json ./
[[- if .Vendor ]]
COPY vendor/ vendor/
[[- end ]]
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY src/ src/
RUN npm run build && find dist -name '*.test.js*' -delete

# The production dependencies, from the lockfile.
FROM ${NODE_IMAGE} AS dependencies
WORKDIR /app
COPY package.json package-lock.json ./
[[- if .Vendor ]]
COPY vendor/ vendor/
[[- end ]]
RUN npm ci --omit=dev --no-audit --no-fund

FROM ${NODE_IMAGE}
WORKDIR /app
COPY package.json ./
COPY --from=dependencies /app/node_modules/ node_modules/
COPY --from=builder /app/dist/ dist/
ENV NODE_ENV=production
# The host's user: the host and the sidecar connect to each other's unix
# sockets in the shared volume, which takes the same user.
USER 65532:65532
ENTRYPOINT ["node", "/app/dist/main.js"]
`

const dockerignore = `node_modules/
dist/
`

const gitignore = `# npm's installation and tsc's output.
node_modules/
dist/
[[- if .Vendor ]]
# The polyop SDK packed from a local checkout (polyop init --sdk-source):
# make setup copies it here.
vendor/
[[- end ]]
`

const readmeSection = `The sidecar is an npm package of ES modules on [@polyop/sidecar](https://github.com/polyop/polyop/tree/main/sdk/typescript),
compiled by tsc (strict) from ` + "`src/`" + ` into ` + "`dist/`" + `, run by Node.js 20 or later:

| file | what |
| --- | --- |
| ` + "`src/main.ts`" + ` | the entry point: ` + "`node dist/main.js --address unix:///…/sidecar.sock`" + ` |
| ` + "`src/sidecar.ts`" + ` | ` + "`newSidecar()`" + `: the reconcilers, webhooks and conversions the sidecar registers |
| ` + "`src/api/<version>/<kind>.ts`" + ` | each kind's types, declared with ` + "`defineKind`" + ` and TypeBox: the static type the handlers receive, and the CRD ` + "`make manifests`" + ` writes into ` + "`config/crd/bases`" + ` |
| ` + "`src/controllers/<kind>.ts`" + ` | each kind's reconciler |
| ` + "`src/webhooks/`" + ` | defaulters, validators and converters |
| ` + "`src/**/*.test.ts`" + ` | tests, run by node's test runner on the compiled ` + "`dist/`" + `, with the SDK's ` + "`Harness`" + ` in place of the host |

npm's scripts do the work (the Makefile calls them): ` + "`npm run build`" + ` compiles, ` + "`npm test`" + ` compiles and runs
the tests, ` + "`npm run lint`" + ` type-checks. After changing a kind's types, run ` + "`make manifests`" + ` to write its CRD
again. polyop create api and create webhook add their code above the ` + "`+polyop:scaffold:`" + ` lines of
` + "`src/sidecar.ts`" + `: keep them.
[[- if .Vendor ]]

The SDK comes from a local polyop checkout (` + "`polyop init --sdk-source`" + `): ` + "`make setup`" + ` packs it there
(` + "`make dist-typescript`" + `) and copies the tarball into ` + "`vendor/`" + `, which ` + "`package.json`" + ` depends on.
After changing the SDK there, ` + "`make -B setup`" + ` packs and installs it again.
[[- end ]]
`

const kindTS = `import { Type, type Static } from "@sinclair/typebox";

import { defineKind, Kube } from "@polyop/sidecar/crd";

/** The desired state of a [[ .Kind ]]. */
export const [[ .Kind ]]Spec = Type.Object({
  message: Type.Optional(Type.String({ description: "The message the reconciler writes into the [[ .Kind ]]'s ConfigMap." })),
});
export type [[ .Kind ]]Spec = Static<typeof [[ .Kind ]]Spec>;

/** The observed state of a [[ .Kind ]]: observedGeneration and conditions. */
export const [[ .Kind ]]Status = Kube.Status();
export type [[ .Kind ]]Status = Static<typeof [[ .Kind ]]Status>;

/**
 * [[ .Kind ]], [[ .APIVersion ]]: its static type for the handlers and its CRD
 * (make manifests runs polyop-crd on the compiled module).
 */
export const [[ .Kind ]] = defineKind({
  group: "[[ .Group ]]",
  version: "[[ .Version ]]",
  kind: "[[ .Kind ]]",
  plural: "[[ .Plural ]]",
  scope: "[[ if .Namespaced ]]Namespaced[[ else ]]Cluster[[ end ]]",
  description: "[[ .Kind ]] is the Schema for the [[ .Plural ]] API.",
[[- if not .Storage ]]
  // The kind's first version is the one stored.
  storage: false,
[[- end ]]
  spec: [[ .Kind ]]Spec,
  status: [[ .Kind ]]Status,
  printerColumns: [{ name: "Ready", type: "string", jsonPath: '.status.conditions[?(@.type=="Ready")].status' }],
});
export type [[ .Kind ]] = Static<typeof [[ .Kind ]]>;
`

const controllerTS = `import { setCondition,[[ if .Namespaced ]] type KubeResource,[[ end ]] type Result } from "@polyop/sidecar";

import type { [[ .Kind ]] } from "[[ .APIFromParent ]]";
[[- if .Namespaced ]]

/** The child a [[ .Kind ]] desires. */
export interface ConfigMap extends KubeResource {
  data?: Record<string, string>;
}
[[- end ]]

/**
[[- if .Namespaced ]]
 * Reconciles a [[ .Kind ]]: it desires one ConfigMap named like it, in its
 * namespace, holding spec.message (the host applies it, owned by the
 * [[ .Kind ]], and deletes the children no longer desired), and marks the
 * [[ .Kind ]] Ready.
[[- else ]]
 * Reconciles a [[ .Kind ]] (cluster-scoped: no children) and marks it Ready.
[[- end ]]
 */
export function reconcile[[ .Kind ]]([[ .Var ]]: [[ .Kind ]]): Result {
  [[ .Var ]].status ??= {};
  setCondition([[ .Var ]].status, {
    type: "Ready",
    status: "True",
    reason: "Reconciled",
    message: "[[ if .Namespaced ]]The ConfigMap holds spec.message[[ else ]]Reconciled[[ end ]]",
    observedGeneration: [[ .Var ]].metadata.generation,
  });
  [[ .Var ]].status.observedGeneration = [[ .Var ]].metadata.generation;
[[- if .Namespaced ]]
  const configMap: ConfigMap = {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: [[ .Var ]].metadata.name, namespace: [[ .Var ]].metadata.namespace },
    data: { message: [[ .Var ]].spec.message ?? "" },
  };
  return { desiredChildren: [configMap], childrenComplete: true };
[[- else ]]
  return {};
[[- end ]]
}
`

const controllerTestTS = `import assert from "node:assert/strict";
import { test } from "node:test";

import { discardLogger } from "@polyop/sidecar";
import { Harness } from "@polyop/sidecar/testing";

import { [[ .Kind ]] } from "[[ .APIFromParent ]]";
import { newSidecar } from "../sidecar.js";

function sample(): [[ .Kind ]] {
  return {
    apiVersion: [[ .Kind ]].apiVersion,
    kind: [[ .Kind ]].kind,
    metadata: { name: "[[ .SampleName ]]",[[ if .Namespaced ]] namespace: "default",[[ end ]] generation: 2 },
    spec: { message: "[[ .Message ]]" },
  };
}

test("reconciling the sample [[ if .Namespaced ]]desires a ConfigMap with its message and [[ end ]]marks it Ready", async () => {
  const harness = new Harness(newSidecar({ logger: discardLogger }));
  const outcome = await harness.reconcile(sample());

  assert.equal(outcome.error, undefined);
[[- if .Namespaced ]]
  assert.equal(outcome.desiredChildren.length, 1);
  assert.deepEqual(outcome.desiredChildren[0], {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: "[[ .SampleName ]]", namespace: "default" },
    data: { message: "[[ .Message ]]" },
  });
  assert.equal(outcome.childrenComplete, true);
[[- else ]]
  assert.deepEqual(outcome.desiredChildren, []);
[[- end ]]
  const ready = outcome.status?.conditions?.find((c) => c.type === "Ready");
  assert.equal(ready?.status, "True");
  assert.equal(ready?.reason, "Reconciled");
  assert.equal(ready?.observedGeneration, 2);
  assert.equal(outcome.status?.observedGeneration, 2);
});
`

const defaulterTS = `import type { [[ .Kind ]] } from "[[ .APIFromParent ]]";

/** The message a [[ .Kind ]] gets when it has none. */
export const defaultMessage = "[[ .Message ]]";

/** Fills in what a [[ .Kind ]] leaves out, as a mutating webhook: spec.message. */
export function default[[ .Kind ]]([[ .Var ]]: [[ .Kind ]]): void {
  [[ .Var ]].spec.message ||= defaultMessage;
}
`

const defaulterTestTS = `import assert from "node:assert/strict";
import { test } from "node:test";

import { discardLogger } from "@polyop/sidecar";
import { Harness } from "@polyop/sidecar/testing";

import { [[ .Kind ]] } from "[[ .APIFromParent ]]";
import { newSidecar } from "../../sidecar.js";

function [[ .Var ]](spec: [[ .Kind ]]["spec"]): [[ .Kind ]] {
  return { apiVersion: [[ .Kind ]].apiVersion, kind: [[ .Kind ]].kind, metadata: { name: "[[ .SampleName ]]"[[ if .Namespaced ]], namespace: "default"[[ end ]] }, spec };
}

test("defaulting fills in an empty message and keeps a given one", async () => {
  const harness = new Harness(newSidecar({ logger: discardLogger }));

  const defaulted = await harness.default([[ .Var ]]({}));
  assert.equal(defaulted.allowed, true);
  assert.equal(defaulted.object.spec.message, "[[ .Message ]]");

  const kept = await harness.default([[ .Var ]]({ message: "ahoy" }));
  assert.equal(kept.object.spec.message, "ahoy");
});
`

const validatorTS = `import { field, type AdmissionContext, type FieldError } from "@polyop/sidecar";

import type { [[ .Kind ]] } from "[[ .APIFromParent ]]";

/** The longest spec.message a [[ .Kind ]] may have. */
export const maxMessageLength = [[ .MaxMessage ]];

/**
 * Refuses, as a validating webhook, a [[ .Kind ]] whose spec.message is longer
 * than maxMessageLength, on create and update, with a field error the API
 * server returns as 422 Invalid naming spec.message. Deleting is allowed.
 */
export function validate[[ .Kind ]]([[ .Var ]]: [[ .Kind ]], ctx: AdmissionContext<[[ .Kind ]]>): FieldError[] {
  if (ctx.operation === "DELETE") {
    return [];
  }
  const message = [[ .Var ]].spec.message ?? "";
  if (message.length > maxMessageLength) {
    return [field.tooLongCharacters("spec.message", message, maxMessageLength)];
  }
  return [];
}
`

const validatorTestTS = `import assert from "node:assert/strict";
import { test } from "node:test";

import { discardLogger } from "@polyop/sidecar";
import { Harness } from "@polyop/sidecar/testing";

import { [[ .Kind ]] } from "[[ .APIFromParent ]]";
import { newSidecar } from "../../sidecar.js";

function [[ .Var ]](message: string): [[ .Kind ]] {
  return { apiVersion: [[ .Kind ]].apiVersion, kind: [[ .Kind ]].kind, metadata: { name: "[[ .SampleName ]]"[[ if .Namespaced ]], namespace: "default"[[ end ]] }, spec: { message } };
}

test("validation refuses a message longer than [[ .MaxMessage ]] characters, on create and update, naming spec.message", async () => {
  const harness = new Harness(newSidecar({ logger: discardLogger }));
  const tooLong = [[ .Var ]]("x".repeat([[ .MaxMessage ]] + 1));

  for (const outcome of [await harness.validate(tooLong), await harness.validate(tooLong, { old: [[ .Var ]]("x") })]) {
    assert.equal(outcome.allowed, false);
    assert.deepEqual(outcome.denied?.fieldErrors.map((e) => [e.field, e.type]), [ ["spec.message", "TooLong"] ]);
  }
});

test("validation allows a message of [[ .MaxMessage ]] characters, and deleting", async () => {
  const harness = new Harness(newSidecar({ logger: discardLogger }));

  assert.equal((await harness.validate([[ .Var ]]("x".repeat([[ .MaxMessage ]])))).allowed, true);
  const tooLong = [[ .Var ]]("x".repeat([[ .MaxMessage ]] + 1));
  assert.equal((await harness.validate(tooLong, { operation: "DELETE", old: tooLong })).allowed, true);
});
`

const converterTS = `import type { KubeResource } from "@polyop/sidecar";

[[ range .Versions -]]
import { [[ $.Kind ]] as [[ .Ident ]] } from "[[ .Module ]]";
[[ end ]]
/** The apiVersions of [[ .Kind ]] the converter converts between, any to any. */
export const [[ .Lower ]]Versions: readonly string[] = [[ "[" ]][[ range $i, $v := .Versions ]][[ if $i ]], [[ end ]][[ .Ident ]].apiVersion[[ end ]]];

/**
 * Converts a [[ .Kind ]] to desiredApiVersion, as the CRD's conversion webhook.
 * The versions have the same fields, copied across as they are; map the
 * fields here when a version renames or moves one.
 */
export function convert[[ .Kind ]](obj: KubeResource, desiredApiVersion: string): KubeResource {
  if (![[ .Lower ]]Versions.includes(desiredApiVersion)) {
    throw new Error("cannot convert [[ .Kind ]] " + obj.metadata.name + " to " + desiredApiVersion + ": the versions are " + [[ .Lower ]]Versions.join(", "));
  }
  return { ...structuredClone(obj), apiVersion: desiredApiVersion };
}
`

const converterTestTS = `import assert from "node:assert/strict";
import { test } from "node:test";

import { discardLogger } from "@polyop/sidecar";
import { Harness } from "@polyop/sidecar/testing";

[[ range .Versions -]]
import { [[ $.Kind ]] as [[ .Ident ]] } from "[[ .Module ]]";
[[ end -]]
import { newSidecar } from "../sidecar.js";

test("conversion copies a [[ .Kind ]]'s fields across every pair of versions", async () => {
  const harness = new Harness(newSidecar({ logger: discardLogger }));
  const versions = [[ "[" ]][[ range $i, $v := .Versions ]][[ if $i ]], [[ end ]][[ .Ident ]].apiVersion[[ end ]]];
  for (const from of versions) {
    for (const to of versions) {
      const obj = {
        apiVersion: from,
        kind: "[[ .Kind ]]",
        metadata: { name: "[[ .SampleName ]]"[[ if .Namespaced ]], namespace: "default"[[ end ]] },
        spec: { message: "[[ .Message ]]" },
        status: { observedGeneration: 1 },
      };
      const [converted] = await harness.convert([obj], to);
      assert.deepEqual(converted, { ...obj, apiVersion: to });
    }
  }
});
`
