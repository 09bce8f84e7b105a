// ESLint (flat config) with typescript-eslint. Formatting is prettier's job (.prettierrc.json),
// so no stylistic rules here. A few type-aware rules catch what tsc does not: promises nobody
// awaits or handles, which in a queue worker lose rows silently.
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default defineConfig(
  {
    ignores: [
      'dist/',
      'coverage/',
      'node_modules/',
      'test/artifacts/',
      'bench/out/',
      '.crm-sync/',
      'crm-sync-results/',
      '.dist-build-*/',
      '.dist-old-*/',
    ],
  },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    languageOptions: {
      globals: globals.node,
      parserOptions: {
        projectService: { allowDefaultProject: ['*.js', 'bin/*.js', 'scripts/*.js', 'test/helpers/*.mjs'] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { arguments: false } }],
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' },
      ],
      // `any` needs a why-comment (project standard); the disable comment is where it goes.
      '@typescript-eslint/no-explicit-any': 'error',
    },
  },
  {
    // A module's public surface is its index.ts (docs/architecture.md, "Modules"); a module
    // whose index loads a heavy library also offers light.ts, the part that loads none, for
    // command declarations and store-only commands. Nothing else of another module is imported.
    files: ['src/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^(\\.\\./)+[a-z-]+/(?!(index|light)\\.js$)',
              message: 'Import another module through its index.ts (or its light.ts), not one of its files.',
            },
            {
              regex: '^\\./[a-z-]+/(?!(index|light)\\.js$)',
              message: 'Import a sub-module (a folder of this module) through its index.ts.',
            },
          ],
        },
      ],
    },
  },
);
