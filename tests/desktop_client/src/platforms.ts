// Our stand-ins for the apps' AgentsPlatform adapters (frontend/apps/desktop/src/agents-platform.ts
// and frontend/apps/web/app/web-agents-platform.ts at 7819d47), reduced to what the agents client
// calls: getSigner, and registerSigner on the web. The keys are held here instead of in the
// desktop's daemon or the browser's IndexedDB; the signer objects have the apps' shapes.
import * as blobs from '@shm/shared/blobs'
import {setAgentsPlatform, type AgentsPlatform} from '@shm/ui/agents/platform'
import {base58btc} from 'multiformats/bases/base58'

function notHere(name: string) {
  return () => {
    throw new Error(`${name} is not part of the test platform`)
  }
}

function basePlatform(): Omit<AgentsPlatform, 'getSigner'> {
  const settings = new Map<string, unknown>()
  return {
    defaultServerUrl: () => null,
    getSetting: async (key) => settings.get(key) ?? null,
    setSetting: async (key, value) => void settings.set(key, value),
    useAccountUid: notHere('useAccountUid'),
    useNavigate: notHere('useNavigate'),
    useOpenUrl: notHere('useOpenUrl'),
    CommentEditor: notHere('CommentEditor') as unknown as AgentsPlatform['CommentEditor'],
  }
}

/**
 * The desktop: the daemon signs as the account itself (createDaemonSigner: the principal decoded
 * from the account id, the signature from the daemon's key of that name), and there is no
 * registerSigner.
 */
export function installDesktopPlatform(accountSeeds: Uint8Array[]): string[] {
  const daemonKeys = new Map<string, blobs.NobleKeyPair>()
  for (const seed of accountSeeds) {
    const key = blobs.nobleKeyPairFromSeed(seed)
    daemonKeys.set(blobs.principalToString(key.principal), key)
  }
  setAgentsPlatform({
    ...basePlatform(),
    getSigner: async (accountUid: string): Promise<blobs.Signer> => {
      const principal = base58btc.decode(accountUid)
      return {
        principal,
        sign: async (data: Uint8Array) => {
          const key = daemonKeys.get(accountUid)
          if (!key) throw new Error(`the daemon holds no key named ${accountUid}`)
          return key.sign(data)
        },
      }
    },
  })
  return [...daemonKeys.keys()]
}

/**
 * The web app: one device key signs for the account the vault delegated to it, and registerSigner
 * proves the delegation with the capability blob (registerWebSigner: a RegisterSigner the device
 * signs as itself).
 */
export function installWebPlatform(input: {
  deviceSeed: Uint8Array
  delegatedAccountUid: string
  capability: Uint8Array
  sendAgentAction: (input: {serverUrl: string; accountUid: string; action: any}) => Promise<unknown>
}): {deviceUid: string; registered: string[]} {
  const device = blobs.nobleKeyPairFromSeed(input.deviceSeed)
  const deviceUid = blobs.principalToString(device.principal)
  const registered: string[] = []
  setAgentsPlatform({
    ...basePlatform(),
    getSigner: async (accountUid: string) => {
      if (deviceUid !== accountUid && input.delegatedAccountUid !== accountUid) {
        throw new Error('Agents actions must be signed by the local web identity')
      }
      return device
    },
    registerSigner: async (serverUrl: string) => {
      registered.push(serverUrl)
      await input.sendAgentAction({
        serverUrl,
        accountUid: deviceUid,
        action: {_: 'RegisterSigner', capability: input.capability},
      })
    },
  })
  return {deviceUid, registered}
}
