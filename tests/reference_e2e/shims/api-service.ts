// Only what the live check uses of the reference's api-service: createSignedEnvelope, verbatim.
import * as blobs from '@shm/shared/blobs'
export async function createSignedEnvelope(
  signer: blobs.Signer,
  input: {account?: blobs.Principal; action: any; ts?: number},
): Promise<any> {
  const envelope: any = {
    type: 'AgentsAction',
    signer: signer.principal,
    sig: new Uint8Array(blobs.ED25519_SIGNATURE_SIZE),
    account: input.account ?? signer.principal,
    action: {...input.action, ts: input.ts ?? Date.now()},
  }
  return (await blobs.sign(signer, envelope as unknown as blobs.Blob)) as unknown as any
}
