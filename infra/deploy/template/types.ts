/** The shapes of a CloudFormation template that the modules of this folder build. */

/** A JSON value of a template. */
export type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

/** A resource of a template. */
export type Resource = {
  Type: string;
  Properties: Record<string, Json>;
  DependsOn?: string[];
  DeletionPolicy?: 'Retain' | 'Delete';
  UpdateReplacePolicy?: 'Retain' | 'Delete';
  Condition?: string;
};
