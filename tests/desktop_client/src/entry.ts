// The bundle's surface: the desktop's agents client and the helpers it is called with, all from
// seed-hypermedia/seed 7819d47 unchanged (see build.mjs), plus our platform adapters.
export {
  getAgentServerHealth,
  getAgentWebSocketUrl,
  isSafeAgentServerSecretTarget,
  normalizeAgentServerUrl,
  sendAgentAction,
  signAgentAction,
} from '@shm/ui/agents/client'
export {getAgentsPlatform, setAgentsPlatform} from '@shm/ui/agents/platform'
export * as blobs from '@shm/shared/blobs'
export * as cbor from '@shm/shared/cbor'
// The create-agent dialog's default prompt: markdownBlockNodesToHMBlockNodes(parseMarkdown(text).tree).
export {markdownBlockNodesToHMBlockNodes, parseMarkdown} from '@seed-hypermedia/client/markdown-to-blocks'
// The transcript as session.tsx builds it from GetSession's events: rows, each message's actor.
export {buildAgentSessionChatRows, isOptimisticUserEcho} from '@shm/ui/agents/agent-session-rows'
export {sessionEventActor} from '@seed-hypermedia/agents-protocol'
export {installDesktopPlatform, installWebPlatform} from './platforms'
