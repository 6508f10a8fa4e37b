/**
 * How the control plane's LMDB environment encodes its records: msgpack maps. lmdb-js's default
 * writes each object as a msgpackr record whose structure is defined inline, in every value, since
 * the environment shares no structures; every read then defines those structures anew, which cost
 * more than reading the keys of a map (docs/performance.md, "Envelope creation"). Records written
 * the earlier way are still read: the decoder reads both. A build before schema version 7 would
 * read maps as `Map` objects, so that version makes it refuse the store instead.
 */
export const RECORD_ENCODING = { useRecords: false, mapsAsObjects: true } as const;
