import { defineEvent, EventTopics } from '../../lib/core';

export interface OrderPlaced {
  orderId: string;
  amount: number;
}

/** `shop.OrderPlaced`, keyed by order id, on topic `orders`. */
export const OrderPlaced = defineEvent<OrderPlaced>({
  name: 'shop.OrderPlaced',
  topic: 'orders',
  schema: {
    type: 'record',
    fields: [
      { name: 'orderId', type: 'string' },
      { name: 'amount', type: 'int' },
    ],
  },
  key: (v) => v.orderId,
});

export interface UserSignedUp {
  email: string;
}

/** `auth.UserSignedUp`, no key function, on topic `users`. */
export const UserSignedUp = defineEvent<UserSignedUp>({
  name: 'auth.UserSignedUp',
  topic: 'users',
  schema: { type: 'record', fields: [{ name: 'email', type: 'string' }] },
});

/** An order event. */
export function orderPlaced(orderId = 'o-1', amount = 42) {
  return OrderPlaced.of({ orderId, amount });
}

/** Topics with both test event types registered. */
export function testTopics(): EventTopics {
  return new EventTopics().register(OrderPlaced).register(UserSignedUp);
}
