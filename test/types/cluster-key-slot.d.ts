// cluster-key-slot (ioredis' own slot function) ships no types; the tests use its default export.
declare module 'cluster-key-slot' {
  /** The Redis Cluster hash slot (0..16383) of a key, honouring a `{…}` hash tag. */
  export default function clusterKeySlot(key: string): number;
}
