// avsc's types-only entry point (`Type`, `types`: no containers, services or IDL), typed by
// the package's own declarations.
declare module 'avsc/etc/browser/avsc-types.js' {
  import type avro from 'avsc';

  const types: Pick<typeof avro, 'Type' | 'types'>;
  export default types;
}
