import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/**', 'dist/**', 'data/**', '.tools/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-restricted-imports': 'off',
    },
  },
  {
    files: ['core/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: ['**/proxy/**', '**/control-plane/**', '**/standalone/**'] }],
    },
  },
  {
    files: ['proxy/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: ['**/control-plane/**', '**/standalone/**'] }] },
  },
  {
    // The control plane reaches its state through control-plane/storage only; its LMDB backend alone opens LMDB.
    files: ['control-plane/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [{ name: 'lmdb', message: 'use the repositories of control-plane/storage' }],
          patterns: ['**/proxy/**', '**/standalone/**'],
        },
      ],
    },
  },
  {
    files: ['control-plane/storage/lmdb/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: ['**/proxy/**', '**/standalone/**'] }] },
  },
  {
    // Tests read JSON answers as loosely typed values and check them with expect(); the
    // unsafe-any rules add casts there without catching anything.
    files: ['test/**/*.ts', '**/*.test.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
    },
  },
  { files: ['eslint.config.js', 'vitest.config.ts'], ...tseslint.configs.disableTypeChecked },
);
