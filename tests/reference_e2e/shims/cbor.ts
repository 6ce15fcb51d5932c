import * as dagCbor from '@ipld/dag-cbor'
export function encode<T = unknown>(value: T): Uint8Array { return dagCbor.encode(value) }
export function decode<T = unknown>(data: Uint8Array): T { return dagCbor.decode(data) as T }
