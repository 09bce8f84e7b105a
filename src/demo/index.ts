export {
  runDemo,
  kindWords,
  DEMO_IMPORTS,
  SAMPLES_DIR,
  SAMPLE_SEED,
  SAMPLE_RECORDS,
  type DemoOptions,
  type DemoResult,
  type DemoImport,
} from './run-demo.js';
