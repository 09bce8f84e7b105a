import { describe, expect, it } from 'vitest';
import { isCrmSyncError } from '../../src/errors/index.js';
import { ID_FREE_MATCH_KEYS } from '../../src/ingest/file-check.js';
import { ingest, parseMapping } from '../../src/ingest/index.js';
import { MATCH_KEYS } from '../../src/reconcile/index.js';
import { collect, fixtureDir } from './fixtures.js';

const files = fixtureDir();

/** The error ingest ends with before any row is read, or null when it starts reading. */
async function refusal(name: string, content: string, options: Parameters<typeof ingest>[1]): Promise<string | null> {
  try {
    const { rows } = await ingest(await files.write(name, content), options);
    await collect(rows);
    return null;
  } catch (err) {
    if (isCrmSyncError(err) && err.code === 'INPUT_COLUMNS') return err.message;
    throw err;
  }
}

describe('an update file without an id column (issue 31)', () => {
  it('is refused once, for the file, naming the key column it has and --reconcile --match', async () => {
    const message = await refusal('contacts.csv', 'name,email\nAda,ada@example.com\nBob,bob@example.com\n', {
      op: 'contact.update',
    });
    expect(message).toBe(
      'the file has no "id" column, so no row can be sent: contact.update finds each record by its id. ' +
        'It has the key column "email": import it with --reconcile --match email to find each record by email instead. Nothing was sent.',
    );
  });

  it('names a key column a mapping renames, and a deal key that is no field of the update', async () => {
    const mapping = parseMapping({ columns: { 'E-mail': 'email' } }, 'm.json');
    expect(await refusal('mapped.csv', 'name,E-mail\nAda,a@b.example\n', { op: 'contact.update', mapping })).toContain(
      'It has the key column "E-mail" (email): import it with --reconcile --match email',
    );
    expect(await refusal('deals.csv', 'unique_number,value\nD-1,5\n', { op: 'deal.update' })).toContain(
      'It has the key column "unique_number": import it with --reconcile --match unique_number',
    );
  });

  it('without any key column, says what would work', async () => {
    expect(await refusal('leads.csv', 'status\nopen\n', { op: 'lead.update' })).toContain(
      'Add an id column, or match rows by a key column with --reconcile --match email|unique_number|name',
    );
  });

  it('leaves alone creates, files with an id column, and a mapped id column the header misspells (the decoder names the nearest)', async () => {
    expect(await refusal('create.csv', 'name,value\nNew,5\n', { op: 'deal.create' })).toBeNull();
    expect(await refusal('ids.csv', 'id,name\nc1,Ada\n', { op: 'contact.update' })).toBeNull();
    const mapping = parseMapping({ columns: { 'Deal Id': 'id', 'Deal name': 'name' } }, 'm.json');
    expect(await refusal('typo.csv', 'Deal ID,Deal name\nd1,X\n', { op: 'deal.update', mapping })).toContain(
      'the mapping names column "Deal Id", which the file does not have (did you mean "Deal ID"?)',
    );
  });

  it('knows the same match keys as reconcile, for updates only', () => {
    expect(ID_FREE_MATCH_KEYS).toMatchObject({
      'deal.update': MATCH_KEYS.deals,
      'lead.update': MATCH_KEYS.leads,
      'contact.update': MATCH_KEYS.contacts,
    });
    expect(ID_FREE_MATCH_KEYS['deal.create']).toBeUndefined();
    expect(ID_FREE_MATCH_KEYS['team.invite']).toBeUndefined();
  });
});
