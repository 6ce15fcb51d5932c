// Shim of @shm/shared/blobs for the live check (tests/reference_e2e/run.sh): Ed25519 keys as Seed principals, and `sign`
// over the DAG-CBOR of the blob with a zeroed `sig` (as our server verifies).
import {ed25519} from '@noble/curves/ed25519'
import * as dagCbor from '@ipld/dag-cbor'
export const ED25519_SIGNATURE_SIZE = 64
export type Signer = {principal: Uint8Array; secret: Uint8Array}
export type Principal = Uint8Array
export type Blob = Record<string, unknown>
export function generateNobleKeyPair(): Signer {
  const secret = ed25519.utils.randomPrivateKey()
  const pub = ed25519.getPublicKey(secret)
  const principal = new Uint8Array(34)
  principal.set([0xed, 0x01]); principal.set(pub, 2)
  return {principal, secret}
}
export async function sign(signer: Signer, blob: Blob): Promise<Blob> {
  const zeroed = {...blob, sig: new Uint8Array(64)}
  const sig = ed25519.sign(dagCbor.encode(zeroed), signer.secret)
  return {...blob, sig}
}
