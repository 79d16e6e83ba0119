// BullMQ against the RESP server on PORT: first a check that its features work (a delayed
// job, a prioritized one, a job that fails once and is retried, a parent with two children),
// then JOBS jobs added in bulk and processed by a worker with CONCURRENCY, every job's
// `completed` event seen by a QueueEvents (XREAD BLOCK on the queue's event stream).
// Prints one JSON line: jobs per second from the first add to the last completion.
// usage: node jobs.js PORT [JOBS] [CONCURRENCY]
const { Queue, Worker, QueueEvents, FlowProducer } = require('bullmq');

const port = Number(process.argv[2]);
const jobs = Number(process.argv[3] || 5000);
const concurrency = Number(process.argv[4] || 50);
const connection = { host: '127.0.0.1', port, maxRetriesPerRequest: null };
const LIMIT_MS = 120000;

async function until(done, what) {
  const began = Date.now();
  while (!done()) {
    if (Date.now() - began > LIMIT_MS) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

async function features(name) {
  const queue = new Queue(name, { connection });
  const flow = new FlowProducer({ connection });
  const done = new Map();
  let failedOnce = false;
  const worker = new Worker(name, async (job) => {
    if (job.name === 'flaky' && !failedOnce) {
      failedOnce = true;
      throw new Error('fails once');
    }
    done.set(job.name + job.id, Date.now());
    return job.data.n * 2;
  }, { connection, concurrency: 4 });
  const added = Date.now();
  await queue.add('delayed', { n: 1 }, { delay: 300 });
  await queue.add('urgent', { n: 2 }, { priority: 1 });
  await queue.add('flaky', { n: 3 }, { attempts: 3, backoff: { type: 'fixed', delay: 20 } });
  const tree = await flow.add({
    name: 'parent', queueName: name, data: { n: 4 },
    children: [{ name: 'child', queueName: name, data: { n: 5 } },
               { name: 'child', queueName: name, data: { n: 6 } }],
  });
  await until(() => done.size === 6, 'the feature jobs');
  const delayed = [...done].find(([key]) => key.startsWith('delayed'))[1] - added;
  if (delayed < 300) throw new Error(`the delayed job ran after ${delayed} ms`);
  const parent = await queue.getJob(tree.job.id);
  const children = await parent.getChildrenValues();
  if (Object.values(children).sort().join() !== '10,12') throw new Error('children values');
  if (!failedOnce) throw new Error('the flaky job never failed');
  await worker.close();
  await flow.close();
  await queue.obliterate({ force: true });
  await queue.close();
}

async function throughput(name) {
  const queue = new Queue(name, { connection });
  const events = new QueueEvents(name, { connection });
  await events.waitUntilReady();
  let completed = 0;
  events.on('completed', () => { completed += 1; });
  let processed = 0;
  const worker = new Worker(name, async (job) => { processed += 1; return job.data.n; },
    { connection, concurrency, autorun: false });
  const began = Date.now();
  const running = worker.run();
  for (let at = 0; at < jobs; at += 500) {
    const batch = [];
    for (let i = at; i < Math.min(jobs, at + 500); i++) {
      batch.push({ name: 'job', data: { n: i }, opts: { removeOnComplete: 1000 } });
    }
    await queue.addBulk(batch);
  }
  await until(() => processed === jobs, 'the jobs');
  const seconds = (Date.now() - began) / 1000;
  await until(() => completed === jobs, 'the completed events');
  await worker.close();
  await running;
  await events.close();
  await queue.obliterate({ force: true });
  await queue.close();
  return seconds;
}

async function main() {
  const name = `load${Date.now()}`;
  await features(`${name}features`);
  const seconds = await throughput(name);
  console.log(JSON.stringify({ port, jobs, concurrency, seconds, jobs_per_second: Math.round(jobs / seconds) }));
}

main().then(() => process.exit(0), (err) => {
  console.error(`FAILED on port ${port}: ${err.stack || err}`);
  process.exit(1);
});
