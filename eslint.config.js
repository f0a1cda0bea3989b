import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/**', '.data/**', 'coverage/**', 'dist/**'] },
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' }],
    },
  },
  {
    // Read models never depend on process managers (the list of every consumer the runtime drives aside).
    files: ['projectors/**/*.ts'],
    ignores: ['projectors/index.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [{ regex: '(^|/)process-managers(/|$)', message: 'Read models never depend on process managers.' }] }],
    },
  },
);
