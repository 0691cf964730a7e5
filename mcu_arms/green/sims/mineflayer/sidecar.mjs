// The mcu-arms Mineflayer sidecar: one bot on a Minecraft server, driven over JSON lines on stdio.
//
//   stdin : one request per line    {"id": 7, "op": "observe", ...}
//   stdout: one JSON object a line  {"id": 7, "ok": true, "op": "observe", "ms": 4.2, ...}
//                                    {"id": 7, "ok": false, "op": "act", "error": "..."}
//                                    {"event": "damage", "health": 17, "previous": 20, ...}   (unsolicited)
//
// stdout is the protocol and nothing else: before any library is loaded, process.stdout.write and console.log & co.
// are pointed at stderr (protodef prints every malformed packet it meets with console.log), and only `send` keeps
// the real write. Requests run concurrently, so `stop` reaches a running `act`; one act runs at a time. EOF on stdin
// quits the bot and exits 0: the Python side owns this process and stops it by pid.
//
// Ops: ping, connect, observe, capabilities, act, keys, say, seed, stop, reset, stats, close. Started by
// mcu_arms/green/sims/mineflayer/sidecar.py with NODE_PATH pointing at the npm-installed libraries.
import { createRequire } from 'node:module'
import readline from 'node:readline'
import { performance } from 'node:perf_hooks'

const protocolWrite = process.stdout.write.bind(process.stdout)
const stderrWrite = process.stderr.write.bind(process.stderr)
const diverted = { writes: 0, console: 0 }
process.stdout.write = (chunk, encoding, callback) => {
  diverted.writes++
  return stderrWrite(chunk, encoding, callback)
}
for (const name of ['log', 'info', 'debug', 'dir', 'table', 'trace']) {
  console[name] = (...parts) => {
    diverted.console++
    stderrWrite(`[console.${name}] ${parts.map(String).join(' ')}\n`)
  }
}
const send = (message) => protocolWrite(JSON.stringify(message) + '\n')
const note = (...parts) => stderrWrite(`[sidecar] ${parts.map(String).join(' ')}\n`)

const require = createRequire(import.meta.url)
const mineflayer = require('mineflayer')
const { pathfinder, Movements, goals } = require('mineflayer-pathfinder')
const { Vec3 } = require('vec3')
const VERSIONS = {
  node: process.version,
  mineflayer: require('mineflayer/package.json').version,
  'mineflayer-pathfinder': require('mineflayer-pathfinder/package.json').version,
  'minecraft-data': require('minecraft-data/package.json').version
}

// Default time limits per act kind (ms); a request may set its own.
const TIMEOUT_MS = { move: 5000, go_to: 30000, collect: 60000, dig: 15000, place: 8000, equip: 3000, eat: 6000, attack: 20000, retreat: 15000, craft: 10000, smelt: 40000, wait: 30000, deposit: 15000, withdraw: 15000 }
// The threat responses themselves are not stopped by the damage reflex.
const REFLEX_EXEMPT = new Set(['retreat', 'attack', 'eat'])
const STATIONS = ['crafting_table', 'furnace']
const STATION_REACH = 4
const CONTAINER_SEARCH = 16 // deposit and withdraw walk to the nearest chest this near
const HOME_BLOCKS = /^(crafting_table|.*_bed)$/ // placing one makes it home
const SHIELD_HOLD_MS = 1500 // a shield raised on damage is lowered this long after the last hit
const OFF_HAND_SLOT = 45
const UNBREAKABLE_ON_THE_WAY = /_(log|wood|stem|hyphae)$/ // path-finding must not harvest what a task counts

let bot = null
let registry = null
let running = null // the act in progress: {kind, cancel(reason), damageAt, progress}
let counters = {}
let deaths = 0
let lastHealth = null
let chat = [] // what the server said, newest last
let home = null // where the bot spawned, then the last bed or crafting table it placed (as a player remembers it)
let tick = 0 // client physics ticks (20 a second): when each counted event happened
let counted = [] // counted events since the last answer: {event, object, n, tick}
const quirks = {} // what the server sent that a vanilla one would not (counts that are not integers), by kind
let shieldTimer = null
const hitAt = new Map() // entity id -> when the bot last hit it
const dead = new Set() // entity ids that died (some servers never destroy them)

const now = () => performance.now()
const sleep = (ms) => new Promise(resolve => setTimeout(resolve, ms))
const round = (x, digits = 2) => Math.round(x * 10 ** digits) / 10 ** digits
const vec = (v) => v ? [round(v.x), round(v.y), round(v.z)] : null

function count (event, object, n = 1, at = tick) {
  counters[event] = counters[event] || {}
  counters[event][object] = (counters[event][object] || 0) + n
  counted.push({ event, object, n, tick: at })
}

// A stack's count as an integer. Some servers keep counts as text (flying-squid's /give: "10"), and text sums as text
// ("10" + 1 = "101"): a count that is not a number is converted when it reads as a whole number, and counted as a
// quirk either way; one that cannot be read so is left out (counted too).
function wholeCount (raw) {
  if (Number.isInteger(raw) && raw >= 0) return raw
  quirks.count_not_integer = (quirks.count_not_integer || 0) + 1
  const text = String(raw).trim()
  if (/^\d+$/.test(text)) return parseInt(text, 10)
  if (typeof raw === 'number' && Number.isInteger(Math.round(raw)) && Math.abs(raw - Math.round(raw)) < 1e-9 && raw >= 0) return Math.round(raw)
  quirks.count_unreadable = (quirks.count_unreadable || 0) + 1
  return 0
}

function inventory () {
  const held = {}
  if (!bot?.inventory) return held
  for (const item of bot.inventory.items()) held[item.name] = (held[item.name] || 0) + wholeCount(item.count)
  const offHand = bot.inventory.slots[OFF_HAND_SLOT]
  if (offHand) held[offHand.name] = (held[offHand.name] || 0) + wholeCount(offHand.count)
  return held
}

function difference (before, after) {
  const delta = {}
  for (const name of new Set([...Object.keys(before), ...Object.keys(after)])) {
    const change = (after[name] || 0) - (before[name] || 0)
    if (change !== 0) delta[name] = change
  }
  return delta
}

function kindOf (entity) {
  if (entity.type === 'player') return 'player'
  return registry.entitiesByName[entity.name]?.type || entity.type || 'unknown'
}

function nearestEntity (accept, within = 32) {
  let best = null
  let bestDistance = within
  for (const entity of Object.values(bot.entities)) {
    if (entity === bot.entity || !entity.position || dead.has(entity.id) || !accept(entity)) continue
    const distance = entity.position.distanceTo(bot.entity.position)
    if (distance <= bestDistance) { best = entity; bestDistance = distance }
  }
  return best
}

function entityNamed (spec, within = 32) {
  if (spec === undefined || spec === null) return null
  if (typeof spec === 'number' || /^\d+$/.test(String(spec))) return bot.entities[Number(spec)] || null
  return nearestEntity(e => e.name === spec || e.username === spec, within)
}

const hostile = (entity) => kindOf(entity) === 'hostile'

function blocksOf (name, within = 32, most = 16) {
  const block = registry.blocksByName[name]
  if (!block) throw new Error(`unknown block '${name}'`)
  return bot.findBlocks({ matching: block.id, maxDistance: within, count: most })
}

function stationNear (name) {
  return bot.findBlock({ matching: registry.blocksByName[name].id, maxDistance: STATION_REACH })
}

// ------------------------------------------------------------------------------------------------ observe
const SEE_THROUGH = new Set(['air', 'cave_air', 'void_air', 'water', 'lava', 'glass'])
const stateInfo = new Map() // state id -> {name, open}: read once per state from the registry
function infoOf (stateId) {
  let info = stateInfo.get(stateId)
  if (!info) {
    const block = registry.blocksByStateId[stateId]
    const name = block?.name ?? 'air'
    info = { name, air: ['air', 'cave_air', 'void_air'].includes(name), open: !block || SEE_THROUGH.has(name) || block.boundingBox === 'empty' || Boolean(block.transparent) }
    stateInfo.set(stateId, info)
  }
  return info
}

// Exposed blocks only (a face open to air or something see-through): what a player looking around could see, not
// what lies inside the rock. Unloaded cells count as open.
function view (sideways, upDown) {
  const here = bot.entity.position.floored()
  const probe = new Vec3(0, 0, 0)
  const at = (x, y, z) => { probe.set(x, y, z); const id = bot.world.getBlockStateId(probe); return id === undefined ? null : infoOf(id) }
  const opening = (x, y, z) => { const info = at(x, y, z); return !info || info.open }
  const kinds = {}
  for (let dx = -sideways; dx <= sideways; dx++) {
    for (let dz = -sideways; dz <= sideways; dz++) {
      for (let dy = -upDown; dy <= upDown; dy++) {
        const x = here.x + dx; const y = here.y + dy; const z = here.z + dz
        const info = at(x, y, z)
        if (!info || info.air) continue
        if (!(opening(x + 1, y, z) || opening(x - 1, y, z) || opening(x, y + 1, z) || opening(x, y - 1, z) || opening(x, y, z + 1) || opening(x, y, z - 1))) continue
        const steps = Math.abs(dx) + Math.abs(dy) + Math.abs(dz)
        const seen = kinds[info.name]
        if (!seen) kinds[info.name] = { count: 1, offset: [dx, dy, dz], distance: steps }
        else {
          seen.count++
          if (steps < seen.distance) { seen.offset = [dx, dy, dz]; seen.distance = steps }
        }
      }
    }
  }
  return kinds
}

function observe ({ sideways = 16, up_down = 8, entity_radius = 24, feasible = true } = {}) {
  const position = bot.entity.position
  const here = position.floored()
  const neighbours = {}
  for (const [direction, dx, dz] of [['north', 0, -1], ['south', 0, 1], ['east', 1, 0], ['west', -1, 0]]) {
    neighbours[direction] = bot.blockAt(here.offset(dx, 0, dz))?.name ?? null
  }
  const entities = []
  for (const entity of Object.values(bot.entities)) {
    if (entity === bot.entity || !entity.position || dead.has(entity.id)) continue
    const offset = entity.position.minus(position)
    if (offset.norm() > entity_radius) continue
    entities.push({ id: entity.id, name: entity.name || entity.username || 'unknown', kind: kindOf(entity), offset: vec(offset) })
  }
  const slots = { hand: bot.heldItem, 'off-hand': bot.inventory.slots[OFF_HAND_SLOT], head: bot.inventory.slots[5], torso: bot.inventory.slots[6], legs: bot.inventory.slots[7], feet: bot.inventory.slots[8] }
  const equipment = {}
  for (const [slot, item] of Object.entries(slots)) if (item) equipment[slot] = item.name
  const cursor = bot.blockAtCursor?.(5)
  const cursorEntity = bot.entityAtCursor?.(3.5)
  const blocks = view(sideways, up_down)
  const stations = STATIONS.filter(name => stationNear(name))
  return {
    health: bot.health,
    food: bot.food,
    position: vec(position),
    yaw: round(bot.entity.yaw, 4),
    inventory: inventory(),
    equipment,
    blocks,
    sideways,
    up_down,
    adjacent: neighbours,
    entities,
    faced: cursor ? { block: cursor.name, entity: cursorEntity ? (cursorEntity.name || cursorEntity.username) : null } : null,
    stations,
    time_of_day: bot.time?.timeOfDay ?? null,
    home: home ? vec(home) : null,
    shield_raised: Boolean(shieldTimer),
    sleeping: Boolean(bot.isSleeping),
    feasible: feasible ? feasibleNow(blocks, stations) : null,
    busy: running ? running.kind : null,
    deaths,
    counters
  }
}

// What the library finds possible now, as `kind:arg`: what the rule book lists, narrowed by the inventory, the
// stations in reach and the blocks in view.
let rulebook = { crafts: [], sources: [], smelting: {}, fuels: [], placeable: [] }
function feasibleNow (seen, stations) {
  const held = inventory()
  const found = []
  const table = stations.includes('crafting_table') ? stationNear('crafting_table') : null
  for (const name of rulebook.crafts) {
    const item = registry.itemsByName[name]
    if (item && bot.recipesFor(item.id, null, 1, table).length) found.push(`craft:${name}`)
  }
  for (const name of rulebook.sources) {
    const block = registry.blocksByName[name]
    if (!block || !seen[name]) continue
    const tools = block.harvestTools ? Object.keys(block.harvestTools).map(Number) : null
    if (!tools || bot.inventory.items().some(item => tools.includes(item.type))) found.push(`collect:${name}`)
  }
  if (stations.includes('furnace') && rulebook.fuels.some(fuel => held[fuel])) {
    for (const input of Object.keys(rulebook.smelting)) if (held[input]) found.push(`smelt:${input}`)
  }
  for (const name of rulebook.placeable) if (held[name]) found.push(`place:${name}`)
  if (bot.food < 20) for (const name of Object.keys(held)) if (registry.foodsByName[name]) found.push(`eat:${name}`)
  const threat = nearestEntity(hostile, 16)
  if (threat) found.push(`attack:${threat.name}`, `retreat:${threat.name}`)
  return found
}

// ------------------------------------------------------------------------------------------------ the rule book
function itemName (id) { return registry.items[typeof id === 'object' && id !== null ? id.id : id]?.name }

function ingredientsOf (recipe) {
  const used = {}
  const cells = recipe.inShape ? recipe.inShape.flat() : recipe.ingredients || []
  for (const cell of cells) {
    const name = cell === null || cell === undefined ? null : itemName(cell)
    if (name) used[name] = (used[name] || 0) + 1
  }
  return used
}

function needsTable (recipe) {
  if (recipe.inShape) return recipe.inShape.length > 2 || recipe.inShape.some(row => row.length > 2)
  return (recipe.ingredients || []).length > 4
}

// Of an item's recipes, the one made of the plainest materials (oak, cobblestone, iron, ...), then the largest yield.
function plainest (recipes) {
  const plainness = (recipe) => Object.keys(ingredientsOf(recipe)).filter(name => /^(oak_|cobblestone$|stick$|iron_ingot$|coal$|diamond$|string$)/.test(name)).length
  return [...recipes].sort((a, b) => plainness(b) - plainness(a) || b.result.count - a.result.count)[0]
}

function lowestTool (block) {
  if (!block.harvestTools) return null
  const names = Object.keys(block.harvestTools).map(id => registry.items[id]?.name).filter(Boolean)
  return names.find(name => !name.startsWith('golden_')) || names[0] || null
}

function dropsOf (block) {
  const names = new Set((block.drops || []).map(itemName).filter(Boolean))
  if (!names.size) for (const drop of registry.blockLoot?.[block.name]?.drops || []) if (!drop.silkTouch && drop.item) names.add(drop.item)
  return [...names]
}

function capabilities ({ crafts = [], sources = [], smelting = {}, fuels = [], placeable = [] } = {}) {
  rulebook = { crafts, sources, smelting, fuels, placeable }
  const recipes = []
  for (const name of crafts) {
    const item = registry.itemsByName[name]
    const known = item ? registry.recipes[item.id] : null
    if (!known?.length) continue
    const recipe = plainest(known)
    recipes.push({ method: 'craft', item: name, consumes: ingredientsOf(recipe), stations: needsTable(recipe) ? ['crafting_table'] : [], yields: recipe.result.count })
  }
  for (const name of sources) {
    const block = registry.blocksByName[name]
    if (!block) continue
    const tool = lowestTool(block)
    for (const drop of dropsOf(block)) recipes.push({ method: 'collect', item: drop, source: name, requires: tool ? { [tool]: 1 } : {} })
  }
  for (const [input, output] of Object.entries(smelting)) {
    if (registry.itemsByName[input] && registry.itemsByName[output]) recipes.push({ method: 'smelt', item: output, consumes: { [input]: 1 }, stations: ['furnace'] })
  }
  for (const name of placeable) if (registry.blocksByName[name]) recipes.push({ method: 'place', item: name, consumes: { [name]: 1 } })
  return {
    versions: VERSIONS,
    minecraft_version: bot?.version ?? null,
    items: registry.itemsArray.map(item => item.name),
    foods: Object.fromEntries(Object.values(registry.foodsByName).map(food => [food.name, food.foodPoints])),
    hostile: registry.entitiesArray.filter(entity => entity.type === 'hostile').map(entity => entity.name),
    walkable: registry.blocksArray.filter(block => block.boundingBox === 'empty' && !['water', 'lava', 'fire'].includes(block.name)).map(block => block.name),
    recipes,
    timeouts_ms: TIMEOUT_MS
  }
}

// ------------------------------------------------------------------------------------------------ acts
class Stopped extends Error {}

// Stops whatever runs. The path goes with its goal: pathfinder.stop() is not called, as with no path in progress its
// flag outlives the stop and kills the next skill's first path ("Path was stopped before it could be completed").
function halt () {
  try { bot.pathfinder.setGoal(null) } catch (error) {}
  try { bot.stopDigging() } catch (error) {}
  try { bot.clearControlStates() } catch (error) {}
  try { if (bot.currentWindow) bot.closeWindow(bot.currentWindow) } catch (error) {}
}

function checkpoint () {
  if (running?.stoppedBy) throw new Stopped(running.stoppedBy)
}

async function until (condition, ms, every = 50) {
  const start = now()
  while (now() - start < ms) {
    checkpoint()
    if (condition()) return true
    await sleep(every)
  }
  return condition()
}

async function walkTo (goal) {
  checkpoint()
  await bot.pathfinder.goto(goal)
  checkpoint()
}

async function act ({ kind, args = {}, timeout_ms: timeoutMs }) {
  if (!ACTS[kind]) throw new Error(`unknown act kind '${kind}' (known: ${Object.keys(ACTS).join(', ')})`)
  if (running) return { kind, status: 'busy', reason: `${running.kind} is still running`, duration_ms: 0, inventory_delta: {}, ...standing() }
  const before = inventory()
  const deathsBefore = deaths
  const start = now()
  let abort
  const aborted = new Promise((resolve, reject) => { abort = reject })
  aborted.catch(() => {})
  const me = { kind, progress: {}, stoppedBy: null, damageAt: null }
  me.stop = (why) => {
    if (me.stoppedBy) return
    me.stoppedBy = why
    halt()
    abort(new Stopped(why))
  }
  running = me
  const timer = setTimeout(() => me.stop('timeout'), timeoutMs ?? TIMEOUT_MS[kind])
  const work = ACTS[kind](args, before)
  work.catch(() => {})
  let answer
  try {
    answer = await Promise.race([work, aborted])
  } catch (error) {
    halt()
    answer = error instanceof Stopped
      ? { status: error.message === 'timeout' ? 'timeout' : 'interrupted', reason: error.message, details: { ...me.progress } }
      : { status: 'error', reason: String(error?.message || error), details: { ...me.progress } }
  } finally {
    clearTimeout(timer)
    if (me.stoppedBy) await Promise.race([work.catch(() => {}), sleep(1500)]) // let its own awaits unwind
    running = null
  }
  await sleep(50) // the last slot updates land
  if (deaths > deathsBefore) answer = { ...answer, status: 'died', reason: `died during ${kind}` + (answer.reason ? ` (${answer.reason})` : '') }
  return {
    kind,
    status: answer.status,
    reason: answer.reason ?? null,
    details: answer.details || {},
    duration_ms: round(now() - start, 1),
    inventory_delta: difference(before, inventory()),
    stopped_after_damage_ms: me.stoppedBy === 'damage' ? round(now() - me.damageAt, 1) : null,
    ...standing()
  }
}

// What every step reports beside its own answer: the vitals, the inventory, the counters since the last reset, the
// counted events since the last answer with the tick each happened on, and the server's quirks so far.
function standing () {
  const events = counted
  counted = []
  return { health: bot?.health ?? null, food: bot?.food ?? null, inventory: inventory(), deaths, counters, counted: events, quirks }
}

// The reflex's shield: raised (use with the off-hand) when a shield is really there, lowered SHIELD_HOLD_MS after the
// last hit; each reported as an event.
function raiseShield (b) {
  const offHand = b.inventory.slots[OFF_HAND_SLOT]
  if (offHand?.name !== 'shield') return
  if (!shieldTimer) {
    b.activateItem(true)
    send({ event: 'shield_raised', health: b.health, during: running?.kind ?? null, wall_ms: Date.now() })
  }
  clearTimeout(shieldTimer)
  shieldTimer = setTimeout(() => {
    shieldTimer = null
    try { b.deactivateItem() } catch (error) { note('deactivateItem:', error.message) }
    send({ event: 'shield_lowered', health: b.health, during: running?.kind ?? null, wall_ms: Date.now() })
  }, SHIELD_HOLD_MS)
}

// Chat lines the agent tagged by source (the Python side lets through only tagged ones; a command never).
async function say ({ lines = [] }) {
  let said = 0
  for (const line of lines) {
    if (typeof line !== 'string' || line.startsWith('/')) continue
    bot.chat(line)
    said++
  }
  return { said }
}

// Items between the inventory and the nearest chest; judged by the inventory afterwards.
async function transfer (way, item, wanted) {
  const kind = registry.itemsByName[item]
  if (!kind) return { status: 'failure', reason: `unknown item '${item}'` }
  const chest = bot.findBlock({ matching: ['chest', 'barrel', 'trapped_chest'].map(name => registry.blocksByName[name]?.id).filter(id => id !== undefined), maxDistance: CONTAINER_SEARCH })
  if (!chest) return { status: 'failure', reason: `no chest within ${CONTAINER_SEARCH}` }
  await walkTo(new goals.GoalLookAtBlock(chest.position, bot.world, { reach: 4 }))
  const before = inventory()[item] || 0
  const container = await bot.openContainer(chest)
  try {
    const available = way === 'deposit' ? before : container.containerItems().filter(held => held.name === item).reduce((sum, held) => sum + wholeCount(held.count), 0)
    const moving = Math.min(wanted, available)
    if (!moving) return { status: 'failure', reason: way === 'deposit' ? `no ${item} in the inventory` : `no ${item} in the chest` }
    await container[way](kind.id, null, moving)
  } finally {
    container.close()
  }
  const moved = (inventory()[item] || 0) - before
  const done = way === 'deposit' ? moved < 0 : moved > 0
  return { status: done ? 'success' : 'failure', details: { chest: vec(chest.position), moved } }
}

async function dig (block) {
  const at = block.position.clone()
  const name = block.name
  const tool = bot.pathfinder.bestHarvestTool(block)
  if (tool) await bot.equip(tool, 'hand')
  if (!bot.canDigBlock(block)) await walkTo(new goals.GoalLookAtBlock(at, bot.world, { reach: 4.5 }))
  await bot.dig(bot.blockAt(at), true)
  const gone = bot.blockAt(at)?.name !== name
  if (gone) count('mine_block', name)
  return gone
}

// Walk onto the items that appeared since the dig until the inventory holds `wanted` more of `names` (some servers
// throw drops a couple of blocks sideways; an item on the ground is not an item held).
async function pickUp (near, names, before, wanted, appeared, ms = 8000) {
  const gained = () => { const held = inventory(); return names.reduce((sum, name) => sum + (held[name] || 0) - (before[name] || 0), 0) }
  if (await until(() => gained() >= wanted, 700)) return true
  const visited = new Set()
  const start = now()
  while (now() - start < ms) {
    const drops = [...appeared].map(id => bot.entities[id]).filter(entity => entity?.position && !visited.has(entity.id) && entity.position.distanceTo(near) < 10)
      .sort((a, b) => a.position.distanceTo(bot.entity.position) - b.position.distanceTo(bot.entity.position))
    if (!drops.length) return until(() => gained() >= wanted, 500)
    visited.add(drops[0].id)
    try { await walkTo(new goals.GoalNear(drops[0].position.x, drops[0].position.y, drops[0].position.z, 0.5)) } catch (error) {
      if (error instanceof Stopped) throw error
      note('pickup path:', error.message)
    }
    if (await until(() => gained() >= wanted, 800)) return true
  }
  return gained() >= wanted
}

function freeCellBeside () {
  const feet = bot.entity.position.floored()
  for (const [dx, dz] of [[1, 0], [-1, 0], [0, 1], [0, -1], [1, 1], [-1, -1], [1, -1], [-1, 1], [2, 0], [0, 2]]) {
    const cell = feet.offset(dx, 0, dz)
    const here = bot.blockAt(cell)
    const below = bot.blockAt(cell.offset(0, -1, 0))
    if (here && (here.boundingBox === 'empty') && below?.boundingBox === 'block') return cell
  }
  return null
}

const ACTS = {
  async move ({ direction = 'forward', duration_ms: ms = 500 }) {
    const from = bot.entity.position.clone()
    bot.setControlState(direction, true)
    try { await until(() => false, ms) } finally { bot.setControlState(direction, false) }
    await sleep(100)
    const moved = bot.entity.position.distanceTo(from)
    const still = moved < 0.2 && !['jump', 'sneak'].includes(direction)
    return { status: still ? 'failure' : 'success', reason: still ? 'did not move' : null, details: { moved: round(moved), position: vec(bot.entity.position) } }
  },

  async go_to ({ x, y, z, range = 1, block, entity }) {
    let target
    if (block) {
      const found = blocksOf(block, 64, 1)
      if (!found.length) return { status: 'failure', reason: `no ${block} within 64` }
      target = found[0]
      range = Math.max(range, 2)
    } else if (entity !== undefined) {
      const found = entityNamed(entity, 64)
      if (!found) return { status: 'failure', reason: `no ${entity} within 64` }
      target = found.position
    } else target = new Vec3(x, y ?? bot.entity.position.y, z)
    if (y === undefined && !block && entity === undefined) await walkTo(new goals.GoalNearXZ(target.x, target.z, range))
    else await walkTo(new goals.GoalNear(target.x, target.y, target.z, range))
    const distance = y === undefined && !block && entity === undefined
      ? Math.hypot(bot.entity.position.x - target.x, bot.entity.position.z - target.z)
      : bot.entity.position.distanceTo(target)
    const there = distance <= range + 1.5
    return { status: there ? 'success' : 'failure', reason: there ? null : `ended ${round(distance)} away`, details: { target: vec(target), position: vec(bot.entity.position) } }
  },

  async collect ({ block, count: wanted = 1, radius = 32 }, before) {
    const kind = registry.blocksByName[block]
    if (!kind) return { status: 'failure', reason: `unknown block '${block}'` }
    const names = dropsOf(kind)
    const dug = []
    const skipped = new Set()
    const appeared = new Set()
    const onSpawn = (entity) => { if (entity.name === 'item') appeared.add(entity.id) }
    const gained = () => { const held = inventory(); return names.reduce((sum, name) => sum + (held[name] || 0) - (before[name] || 0), 0) }
    bot.on('entitySpawn', onSpawn)
    try {
      for (let attempt = 0; attempt < wanted * 3 + 2 && gained() < wanted; attempt++) {
        const me = bot.entity.position
        const cost = (p) => p.distanceTo(me) + 3 * Math.max(0, p.y - me.y - 1) // low ones first: no pillaring
        const candidates = blocksOf(block, radius, 64).filter(p => !skipped.has(p.toString())).sort((a, b) => cost(a) - cost(b))
        if (!candidates.length) break
        const target = bot.blockAt(candidates[0])
        const record = { position: vec(target.position), removed: false }
        dug.push(record)
        running.progress = { dug, drop_items: names, gained: gained() }
        try {
          await walkTo(new goals.GoalLookAtBlock(target.position, bot.world, { reach: 4 }))
          appeared.clear()
          record.removed = await dig(bot.blockAt(target.position))
        } catch (error) {
          if (error instanceof Stopped) throw error
          record.error = String(error.message || error)
          skipped.add(target.position.toString())
          continue
        }
        if (!record.removed) { skipped.add(target.position.toString()); continue }
        await pickUp(target.position.offset(0.5, 0.5, 0.5), names, before, gained() + 1, appeared)
        running.progress = { dug, drop_items: names, gained: gained() }
      }
    } finally {
      bot.removeListener('entitySpawn', onSpawn)
    }
    const details = { dug, drop_items: names, gained: gained() }
    if (gained() >= wanted) return { status: 'success', details }
    if (!dug.length) return { status: 'failure', reason: `no ${block} within ${radius}`, details }
    return { status: 'failure', reason: `the inventory gained ${gained()} of ${wanted} (${names.join('/')}); blocks removed: ${dug.filter(d => d.removed).length}`, details }
  },

  async dig ({ x, y, z, block }) {
    let target
    if (block) {
      const found = blocksOf(block, 32, 1)
      if (!found.length) return { status: 'failure', reason: `no ${block} within 32` }
      target = bot.blockAt(found[0])
    } else target = bot.blockAt(new Vec3(x, y, z))
    if (!target || target.boundingBox === 'empty') return { status: 'failure', reason: 'nothing to dig there' }
    const name = target.name
    const gone = await dig(target)
    return { status: gone ? 'success' : 'failure', reason: gone ? null : 'the block is still there', details: { block: name, position: vec(target.position) } }
  },

  async place ({ item, x, y, z }, before) {
    const stack = bot.inventory.items().find(held => held.name === item)
    if (!stack) return { status: 'failure', reason: `no ${item} in the inventory` }
    const cell = x !== undefined ? new Vec3(x, y, z) : freeCellBeside()
    if (!cell) return { status: 'failure', reason: 'no free cell beside the bot' }
    let against = null
    let face = null
    for (const [fx, fy, fz] of [[0, -1, 0], [1, 0, 0], [-1, 0, 0], [0, 0, 1], [0, 0, -1], [0, 1, 0]]) {
      const neighbour = bot.blockAt(cell.offset(fx, fy, fz))
      if (neighbour?.boundingBox === 'block') { against = neighbour; face = new Vec3(-fx, -fy, -fz); break }
    }
    if (!against) return { status: 'failure', reason: 'no solid block to place against' }
    if (bot.entity.position.distanceTo(cell.offset(0.5, 0.5, 0.5)) > 4.5) await walkTo(new goals.GoalNear(cell.x, cell.y, cell.z, 3))
    await bot.equip(stack, 'hand')
    try { await bot.placeBlock(against, face) } catch (error) { note('placeBlock:', error.message) } // judged by the world below
    const placed = await until(() => bot.blockAt(cell)?.name === item, 1000)
    if (placed) count('use_item', item)
    if (placed && HOME_BLOCKS.test(item)) home = cell.clone()
    await until(() => (inventory()[item] || 0) < (before[item] || 0), 500)
    return { status: placed ? 'success' : 'failure', reason: placed ? null : `the cell holds ${bot.blockAt(cell)?.name}`, details: { position: vec(cell) } }
  },

  async equip ({ item, destination = 'hand' }) {
    const stack = bot.inventory.items().find(held => held.name === item)
    if (!stack) return { status: 'failure', reason: `no ${item} in the inventory` }
    await bot.equip(stack, destination)
    const slot = { hand: null, 'off-hand': OFF_HAND_SLOT, head: 5, torso: 6, legs: 7, feet: 8 }[destination]
    await until(() => (slot === null ? bot.heldItem : bot.inventory.slots[slot])?.name === item, 1000)
    const worn = (slot === null ? bot.heldItem : bot.inventory.slots[slot])?.name ?? null
    return { status: worn === item ? 'success' : 'failure', reason: worn === item ? null : `${destination} holds ${worn}`, details: { destination, worn } }
  },

  async deposit ({ item, count: wanted = 1 }) { return transfer('deposit', item, wanted) },

  async withdraw ({ item, count: wanted = 1 }) { return transfer('withdraw', item, wanted) },

  async eat ({ item }) {
    const foods = registry.foodsByName
    const stack = item
      ? bot.inventory.items().find(held => held.name === item)
      : bot.inventory.items().filter(held => foods[held.name]).sort((a, b) => foods[b.name].foodPoints - foods[a.name].foodPoints)[0]
    if (!stack) return { status: 'failure', reason: 'no food in the inventory' }
    const foodBefore = bot.food
    await bot.equip(stack, 'hand')
    await bot.consume()
    const rose = await until(() => bot.food > foodBefore, 500)
    if (rose) count('use_item', stack.name)
    return { status: rose ? 'success' : 'failure', reason: rose ? null : 'food did not rise', details: { food_before: foodBefore, food_after: bot.food } }
  },

  async attack ({ entity, hits }) {
    const target = entity !== undefined ? entityNamed(entity) : nearestEntity(hostile, 16)
    if (!target) return { status: 'failure', reason: entity !== undefined ? `no ${entity} near` : 'no hostile near' }
    const id = target.id
    const alive = () => bot.entities[id] && !dead.has(id)
    let landed = 0
    while (alive() && (hits === undefined || landed < hits)) {
      if (bot.entities[id].position.distanceTo(bot.entity.position) > 3) {
        bot.pathfinder.setGoal(new goals.GoalFollow(bot.entities[id], 2), true)
        await until(() => !alive() || bot.entities[id].position.distanceTo(bot.entity.position) <= 3, 5000)
        bot.pathfinder.setGoal(null)
        if (!alive()) break
      }
      await bot.lookAt(bot.entities[id].position.offset(0, (bot.entities[id].height || 1) * 0.8, 0), true)
      hitAt.set(id, Date.now())
      bot.attack(bot.entities[id])
      landed++
      running.progress = { target: target.name, hits: landed }
      await until(() => false, 650) // the attack cooldown
    }
    await sleep(200)
    const gone = !alive()
    return { status: gone || (hits !== undefined && landed >= hits) ? 'success' : 'failure', details: { target: target.name, hits: landed, gone } }
  },

  async retreat ({ from, distance = 10 }) {
    const threat = Array.isArray(from) ? null : (from !== undefined ? entityNamed(from) : nearestEntity(hostile, 32))
    const point = Array.isArray(from) ? new Vec3(...from) : null
    if (!threat && !point) return { status: 'failure', reason: 'nothing to retreat from' }
    const source = () => threat ? threat.position : point
    const away = () => bot.entity.position.distanceTo(source())
    let turn = 0
    try {
      while (away() < distance && !(threat && (!bot.entities[threat.id] || dead.has(threat.id)))) {
        const me = bot.entity.position
        const off = me.minus(source())
        const angle = (off.x === 0 && off.z === 0 ? Math.random() * 2 * Math.PI : Math.atan2(off.z, off.x)) + turn
        const before = away()
        bot.pathfinder.setGoal(new goals.GoalNearXZ(me.x + 8 * Math.cos(angle), me.z + 8 * Math.sin(angle), 1))
        await until(() => away() >= distance, 1000)
        turn = away() - before < 0.5 ? (turn >= 0 ? -(turn + Math.PI / 4) : -turn) : 0 // stuck: try 45 degrees off
      }
    } finally {
      bot.pathfinder.setGoal(null)
      bot.clearControlStates()
    }
    return { status: away() >= distance ? 'success' : 'failure', details: { distance: round(away()), position: vec(bot.entity.position) } }
  },

  async craft ({ item, count: wanted = 1 }) {
    const kind = registry.itemsByName[item]
    if (!kind) return { status: 'failure', reason: `unknown item '${item}'` }
    const table = stationNear('crafting_table')
    const recipes = bot.recipesFor(kind.id, null, 1, table || null)
    if (!recipes.length) {
      const any = bot.recipesAll(kind.id, null, true).length
      return { status: 'failure', reason: any ? (table ? 'missing ingredients' : 'missing ingredients, or it needs a crafting_table within reach') : 'no recipe' }
    }
    const recipe = recipes[0]
    const times = Math.ceil(wanted / recipe.result.count)
    await bot.craft(recipe, times, recipe.requiresTable ? table : null)
    count('craft_item', item, times * recipe.result.count)
    return { status: 'success', details: { with_table: Boolean(recipe.requiresTable) } }
  },

  async smelt ({ item, fuel, count: wanted = 1 }) {
    const at = stationNear('furnace')
    if (!at) return { status: 'failure', reason: `no furnace within ${STATION_REACH}` }
    const input = registry.itemsByName[item]
    const output = rulebook.smelting[item]
    const held = inventory()
    const burn = fuel || rulebook.fuels.find(name => held[name])
    if (!input || !output) return { status: 'failure', reason: `${item} does not smelt` }
    if (!burn) return { status: 'failure', reason: 'no fuel in the inventory' }
    const furnace = await bot.openFurnace(at)
    try {
      await furnace.putFuel(registry.itemsByName[burn].id, null, Math.max(1, Math.ceil(wanted / 8)))
      await furnace.putInput(input.id, null, wanted)
      let taken = 0
      while (taken < wanted) {
        await until(() => furnace.outputItem(), 12000)
        if (!furnace.outputItem()) break
        taken += Number((await furnace.takeOutput())?.count || 0)
      }
      if (taken) count('craft_item', output, taken)
      return { status: taken >= wanted ? 'success' : 'failure', details: { output, taken } }
    } finally {
      furnace.close()
    }
  },

  async wait ({ duration_ms: ms = 1000 }) {
    await until(() => false, ms)
    return { status: 'success' }
  }
}

// Env-style keys for one short stretch (the per-step channel of agents that send no skills).
async function keys ({ controls = [], look = [0, 0], hotbar = null, duration_ms: ms = 50 }) {
  if (running) return { status: 'busy', ...standing() }
  if (hotbar !== null) bot.setQuickBarSlot(hotbar)
  const [pitch, yaw] = look
  if (pitch || yaw) await bot.look(bot.entity.yaw - yaw * Math.PI / 180, Math.max(-Math.PI / 2, Math.min(Math.PI / 2, bot.entity.pitch - pitch * Math.PI / 180)), true)
  for (const control of controls) bot.setControlState(control, true)
  await sleep(ms)
  for (const control of controls) bot.setControlState(control, false)
  return { status: 'success', ...standing() }
}

// ------------------------------------------------------------------------------------------------ connect, reset
async function connect ({ host, port, version, username, timeout_ms: timeoutMs = 30000 }) {
  if (bot) throw new Error('already connected')
  const start = now()
  bot = mineflayer.createBot({ host, port, version, username, auth: 'offline', hideErrors: false, logErrors: true, checkTimeoutInterval: 60000 })
  bot.loadPlugin(pathfinder)
  listen(bot)
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no spawn within ${timeoutMs} ms`)), timeoutMs)
    const fail = (error) => { clearTimeout(timer); reject(error) }
    bot.once('spawn', () => { clearTimeout(timer); resolve() })
    bot.once('error', fail)
    bot.once('kicked', (why) => fail(new Error('kicked: ' + (typeof why === 'string' ? why : JSON.stringify(why)))))
    bot.once('end', (why) => fail(new Error('the connection ended: ' + why)))
  })
  registry = bot.registry
  const movements = new Movements(bot)
  movements.canDig = true
  movements.allowParkour = false
  for (const block of registry.blocksArray) {
    if (UNBREAKABLE_ON_THE_WAY.test(block.name) || [...STATIONS, 'chest', 'barrel'].includes(block.name)) movements.blocksCantBreak.add(block.id)
  }
  bot.pathfinder.setMovements(movements)
  bot.pathfinder.thinkTimeout = 5000
  lastHealth = bot.health
  home = bot.entity.position.floored()
  await bot.waitForChunksToLoad().catch(() => {})
  return { connect_ms: round(now() - start, 1), version: bot.version, username: bot.username, position: vec(bot.entity.position), game_mode: bot.game.gameMode }
}

function listen (b) {
  b.on('health', () => {
    const health = b.health
    if (lastHealth !== null && health < lastHealth) {
      send({ event: 'damage', health, previous: lastHealth, amount: round(lastHealth - health), during: running?.kind ?? null, wall_ms: Date.now() })
      if (running && !REFLEX_EXEMPT.has(running.kind) && !running.stoppedBy) {
        running.damageAt = now()
        running.stop('damage')
      }
      raiseShield(b)
    } else if (lastHealth !== null && health > lastHealth) {
      send({ event: 'heal', health, previous: lastHealth, during: running?.kind ?? null, wall_ms: Date.now() })
    }
    lastHealth = health
  })
  b.on('death', () => { deaths++; send({ event: 'death', health: 0, during: running?.kind ?? null, wall_ms: Date.now() }) })
  b.on('respawn', () => send({ event: 'respawn', health: b.health, wall_ms: Date.now() }))
  b.on('physicsTick', () => { tick++ })
  b.on('kicked', (reason) => send({ event: 'kicked', detail: typeof reason === 'string' ? reason : JSON.stringify(reason), wall_ms: Date.now() }))
  b.on('end', (why) => { send({ event: 'disconnected', detail: String(why), wall_ms: Date.now() }); bot = null })
  b.on('error', (error) => note('bot error:', error?.message || error))
  b.on('messagestr', (text) => { chat.push({ wall_ms: Date.now(), text }); if (chat.length > 200) chat = chat.slice(-100) })
  // pickup: an item collected by the bot. Servers that send no item metadata leave the item unnamed on the client:
  // then it is the slot gain that lands within 300 ms of the collect packet.
  const gains = []
  b.once('spawn', () => {
    b.inventory.on('updateSlot', (slot, old, fresh) => {
      if (!fresh) return
      const added = wholeCount(fresh.count) - (old && old.type === fresh.type ? wholeCount(old.count) : 0)
      if (added > 0) gains.push({ at: now(), name: fresh.name, added, claimed: false })
      while (gains.length > 50) gains.shift()
    })
  })
  b.on('playerCollect', (collector, collected) => {
    if (collector !== b.entity) return
    let item = null
    try { item = collected.getDroppedItem() } catch (error) {}
    if (item) { count('pickup', item.name, wholeCount(item.count)); return }
    const at = now()
    const atTick = tick
    setTimeout(() => {
      const gain = gains.find(g => !g.claimed && Math.abs(g.at - at) < 300)
      if (gain) { gain.claimed = true; count('pickup', gain.name, gain.added, atTick) }
    }, 300)
  })
  // kill_entity: a creature that dies or vanishes within 1.5 s of the bot's hit
  const killed = (entity) => {
    const at = hitAt.get(entity.id)
    if (at && Date.now() - at < 1500 && entity.name !== 'item') { count('kill_entity', entity.name); hitAt.delete(entity.id) }
  }
  b.on('entityDead', (entity) => { dead.add(entity.id); if (entity !== b.entity) killed(entity) })
  b.on('entityGone', killed)
}

// The task's commands, each with what the server said back; then the counters start from zero.
async function reset ({ commands = [], wait_ms: waitMs = 400 }) {
  if (bot.health <= 0) {
    bot.respawn()
    await until(() => bot.health > 0, 5000)
  }
  halt()
  const applied = []
  for (const command of commands) {
    const first = chat.length
    bot.chat(command.startsWith('/') ? command : '/' + command)
    await sleep(waitMs)
    applied.push({ command, replies: chat.slice(first).map(message => message.text) })
  }
  await sleep(100)
  counters = {}
  counted = []
  for (const kind of Object.keys(quirks)) delete quirks[kind]
  deaths = 0
  lastHealth = bot.health
  return { applied, inventory: inventory(), position: vec(bot.entity.position), health: bot.health }
}

// The world's seed as the server says it to an operator (`/seed` answers "Seed: [N]"), or null and what it said.
async function worldSeed ({ wait_ms: waitMs = 1500 } = {}) {
  const first = chat.length
  bot.chat('/seed')
  const said = () => chat.slice(first).map(message => message.text)
  const seen = () => said().map(text => /Seed: \[(-?\d+)\]/.exec(text)).find(Boolean)
  const start = now()
  while (!seen() && now() - start < waitMs) await sleep(50)
  const found = seen()
  return { seed: found ? found[1] : null, replies: said() }
}

// ------------------------------------------------------------------------------------------------ dispatch
const connected = () => { if (!bot) throw new Error('not connected to a server') }
const OPS = {
  ping: async () => ({ versions: VERSIONS }),
  connect: async (request) => connect(request),
  observe: async (request) => { connected(); return { state: observe(request) } },
  capabilities: async (request) => { connected(); return capabilities(request) },
  act: async (request) => { connected(); return act(request) },
  keys: async (request) => { connected(); return keys(request) },
  say: async (request) => { connected(); return say(request) },
  seed: async (request) => { connected(); return worldSeed(request) },
  stop: async () => { const kind = running?.kind ?? null; if (running) running.stop('stopped'); else if (bot) halt(); return { stopped: kind } },
  reset: async (request) => { connected(); return reset(request) },
  stats: async () => ({ rss_bytes: process.memoryUsage().rss, stdout_diverted: diverted, uptime_s: round(process.uptime()) }),
  close: async () => {
    const closing = bot
    bot = null
    try { closing?.quit('closed') } catch (error) {}
    setTimeout(() => process.exit(0), 100)
    return {}
  }
}

const lines = readline.createInterface({ input: process.stdin, terminal: false })
lines.on('line', async (line) => {
  if (!line.trim()) return
  let request
  try { request = JSON.parse(line) } catch (error) { send({ id: null, ok: false, error: 'not JSON: ' + error.message }); return }
  const op = OPS[request.op]
  if (!op) { send({ id: request.id ?? null, ok: false, op: request.op, error: `unknown op '${request.op}'` }); return }
  const start = now()
  try {
    const answer = await op(request)
    send({ id: request.id ?? null, ok: true, op: request.op, ms: round(now() - start, 1), ...answer })
  } catch (error) {
    send({ id: request.id ?? null, ok: false, op: request.op, ms: round(now() - start, 1), error: String(error?.message || error) })
  }
})
lines.on('close', () => {
  try { bot?.quit('stdin closed') } catch (error) {}
  setTimeout(() => process.exit(0), 200)
})
process.on('uncaughtException', (error) => note('uncaught:', error?.stack || error))
process.on('unhandledRejection', (error) => note('unhandled rejection:', error?.stack || error))
send({ event: 'sidecar_ready', pid: process.pid, versions: VERSIONS, wall_ms: Date.now() })
